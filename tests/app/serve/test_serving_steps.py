"""``serve``'s steps in this process: an upload through the gate and the LitAPI answers as ``predict_image``
does; bad uploads get a 4xx with one JSON line; a bad command gets one ``error:`` line, no server."""

import io
from pathlib import Path

import pytest
import torch
from helpers.cli import one_error_line, run_app, run_folder
from helpers.image_files import png_header_only, predict_image_answers, write_image_files
from starlette.responses import Response
from starlette.testclient import TestClient

from app.runs.checkpoints import data_card
from app.serve.api import ImageAPI
from app.serve.gate import Decoder, UploadGate


@pytest.fixture(scope="module")
def ckpt(trained_run) -> Path:
    return run_folder(trained_run) / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="module")
def gate(ckpt) -> TestClient:
    """The gate of a server for ``ckpt``, before an app that answers with the size of what reached it."""

    async def app(scope, receive, send):
        body = (await receive())["body"]
        await Response(str(len(body)))(scope, receive, send)

    decode = Decoder(data_card(str(ckpt)), max_pixels=10_000_000)
    return TestClient(UploadGate(app, decode=decode, max_bytes=2**20, path="/predict"))


def test_an_upload_is_answered_as_predict_image_answers_for_the_file(ckpt, tmp_path):
    files = write_image_files(tmp_path)
    card = data_card(str(ckpt))
    api = ImageAPI(str(ckpt), card, top_k=3, max_batch_size=8)
    api.pre_setup()  # as LitServer does: LitServe's own batch (torch.stack) and unbatch
    api.setup("cpu")
    decode = Decoder(card, max_pixels=10_000_000)
    crops = [api.decode_request(decode(path.read_bytes())) for path in files]
    answers = [api.encode_response(output) for output in api.unbatch(api.predict(api.batch(crops)))]
    alone = api.encode_response(api.predict(crops[0]))["predictions"]  # without batching: one image
    assert [(p["class"], pytest.approx(p["probability"], abs=1e-6)) for p in alone] == [
        (p["class"], p["probability"]) for p in answers[0]["predictions"]
    ]
    expected = predict_image_answers(ckpt, files)
    for path, answer in zip(files, answers, strict=True):
        assert len(answer["predictions"]) == 3
        first = answer["predictions"][0]
        name, probability = expected[path.name]
        assert (first["class_name"], first["probability"]) == (name, pytest.approx(probability, abs=2e-6))
        assert card["class_names"][first["class"]] == name
        assert [p["probability"] for p in answer["predictions"]] == sorted(
            (p["probability"] for p in answer["predictions"]), reverse=True
        )


def test_a_good_upload_reaches_the_model_as_its_input_crop(gate, tmp_path):
    (path, *_) = write_image_files(tmp_path)
    response = gate.post("/predict", content=path.read_bytes())
    assert (response.status_code, response.text) == (200, str(1 * 28 * 28))


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"", 400, "the body is empty"),
        (b"%PDF-1.7 not an image", 400, "not an image"),
        ("truncated", 400, "damaged or cut short"),
        (png_header_only(40_000, 40_000), 413, "pixels"),
        (png_header_only(5_000, 5_000), 413, "more than the 10,000,000 allowed"),
        (b"\xff" * (2**20 + 1), 413, "over 1 MB (--serve.max_upload_mb)"),
    ],
    ids=["empty", "not-an-image", "truncated-jpeg", "bomb", "too-many-pixels", "too-large"],
)
def test_a_bad_upload_gets_a_4xx_with_one_json_line(gate, body, status, says, tmp_path):
    if body == "truncated":
        jpeg = next(p for p in write_image_files(tmp_path) if p.suffix == ".jpg").read_bytes()
        body = jpeg[: len(jpeg) // 2]
    response = gate.post("/predict", content=body)
    assert response.status_code == status
    assert "\n" not in response.text and says in response.json()["error"]
    assert list(response.json()) == ["error"]


def test_a_form_upload_is_told_to_send_the_file_itself(gate, tmp_path):
    (path, *_) = write_image_files(tmp_path)
    response = gate.post("/predict", files={"file": io.BytesIO(path.read_bytes())})
    assert response.status_code == 415 and "--data-binary" in response.json()["error"]


def test_a_missing_file_or_one_that_is_no_checkpoint_is_one_error_line(tmp_path):
    (tmp_path / "notes.ckpt").write_text("not a checkpoint")
    for path, says in [
        (tmp_path / "gone.ckpt", "no such file"),
        (tmp_path / "notes.ckpt", "not a checkpoint"),
    ]:
        result = run_app("serve", f"--ckpt_path={path}", cwd=tmp_path, shrink=False)
        assert result.returncode == 1 and says in one_error_line(result.stderr)


def test_a_misspelt_flag_is_one_error_line(ckpt, tmp_path):
    result = run_app("serve", f"--ckpt_path={ckpt}", "--serve.prot=8001", cwd=tmp_path, shrink=False)
    assert result.returncode == 1 and one_error_line(result.stderr).endswith(
        "--serve.prot=8001; close: --serve.port"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without a GPU")
def test_a_gpu_asked_for_where_there_is_none_is_one_error_line(ckpt, tmp_path):
    result = run_app("serve", f"--ckpt_path={ckpt}", "--serve.accelerator=cuda", cwd=tmp_path, shrink=False)
    assert result.returncode == 1 and "this machine has none" in one_error_line(result.stderr)
