"""The HTTP processes' side of ``POST /predict``: each upload read, decoded and cropped there, or refused."""

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.responses import JSONResponse

from data import DataError
from data.predict_files import TooManyPixels, eval_crop, read_image

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Refused(Exception):
    """An upload the server does not take: the HTTP status and the one-line reason sent back."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class Decoder:
    """Upload bytes to the uint8 (C, S, S) bytes the network takes: :func:`data.predict_files.read_image`
    (any format and mode, upright), then the card's evaluation resize and centre crop.

    Args:
        card: the checkpoint's data card (channels, sizes).
        max_pixels: images with more pixels are refused from their header, before decoding.
    """

    def __init__(self, card: Mapping[str, Any], max_pixels: int) -> None:
        self.channels, self.max_pixels = card["in_channels"], max_pixels
        self.crop = eval_crop(card)

    def __call__(self, body: bytes) -> bytes:
        if not body:
            raise Refused(400, "the body is empty: POST the image file itself (curl --data-binary @FILE URL)")
        try:
            image = read_image(body, self.channels, self.max_pixels)
        except TooManyPixels as err:
            raise Refused(413, f"{err} (--serve.max_pixels)") from err
        except DataError as err:
            raise Refused(400, f"{err}: POST an image file (PNG, JPEG, ...)") from err
        return self.crop(image).contiguous().numpy().tobytes()


class UploadGate:
    """ASGI middleware: a ``POST`` to ``path`` reaches LitServe as its decoded crop, or gets a 4xx with a
    one-line JSON ``{"error": ...}``. Decoding runs in a thread, so a large photo stalls no other request,
    and a bad upload never reaches a batch of good ones.

    Args:
        app: the ASGI app it wraps (LitServe's FastAPI app).
        decode: upload bytes to what the model's worker takes (:class:`Decoder`); raises :class:`Refused`.
        max_bytes: larger bodies are refused (413), read to their end but not kept.
        path: the route it guards.
    """

    def __init__(self, app: Callable, *, decode: Callable[[bytes], bytes], max_bytes: int, path: str) -> None:
        self.app, self.decode, self.max_bytes, self.path = app, decode, max_bytes, path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            if "multipart/form-data" in header(scope, b"content-type"):
                raise Refused(
                    415, "a form upload: POST the image file itself as the body (curl --data-binary @FILE)"
                )
            body = await read_body(receive, self.max_bytes)
            if body is None:
                return  # the client went away
            crop = await asyncio.to_thread(self.decode, body)
        except Refused as refused:
            await JSONResponse({"error": str(refused)}, refused.status)(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-type", b"content-length")]
        headers += [(b"content-type", b"application/octet-stream"), (b"content-length", b"%d" % len(crop))]
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # what follows the body: the client's disconnect
            replayed = True
            return {"type": "http.request", "body": crop, "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)


def header(scope: Scope, name: bytes) -> str:
    """The request header ``name`` (lower case), or ''."""
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), "")


async def read_body(receive: Receive, max_bytes: int) -> bytes | None:
    """The request's body; None where the client disconnected first.

    Raises:
        Refused: 413, the body is over ``max_bytes``; it is read to its end all the same (a client still
            sending would otherwise see its connection reset rather than the answer).
    """
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= max_bytes:
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    if size > max_bytes:
        raise Refused(
            413, f"the upload is {size / 2**20:.1f} MB, over {max_bytes / 2**20:g} MB (--serve.max_upload_mb)"
        )
    return b"".join(chunks)
