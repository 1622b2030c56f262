"""Where shards live: a local folder or ``s3://bucket/prefix``, checked before any work is spent.

S3 settings come the standard way, from the AWS variables and files boto3 reads (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, ``AWS_PROFILE`` ...), for the checks here and for LitData.
The checks ask the server with short timeouts and one attempt, and LitData's client gets short timeouts
and a few attempts (:meth:`Location.litdata_options`): its own default retries for minutes (1,000
adaptive attempts), so an endpoint that does not answer would look like a hang.
"""

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data.vision import DataError, DatasetNotFoundError

SIDE_FILE = "streaming.json"  # beside the splits' folders; written last, so its presence means "whole"
FORMAT, VERSION = "lightning-cnn-template shards", 1  # bump VERSION when what a sample holds changes


def require_litdata() -> None:
    """Raise a :class:`DataError` saying how to install LitData where it is missing."""
    try:
        import litdata  # noqa: F401
    except ImportError as err:
        raise DataError('shards need LitData: pip install ".[streaming]"') from err


def check_chunks(folder: str) -> None:
    """Raise a one-line :class:`DataError` naming the first chunk of the local split ``folder`` that is
    shorter than its index says (a copy cut short): LitData would wait for the rest of it, then fail as
    for a download that hung."""
    try:
        index = json.loads(Path(folder, "index.json").read_bytes())
    except (OSError, ValueError):
        return  # LitData's own reading of the index says what is wrong with it
    if index.get("config", {}).get("compression"):
        return  # chunk_bytes then counts the data before compression
    for chunk in index.get("chunks", []):
        path = Path(folder, chunk["filename"])
        size = path.stat().st_size if path.is_file() else 0
        if size < chunk["chunk_bytes"]:
            raise DataError(
                f"{path} is cut short ({size:,} of its {chunk['chunk_bytes']:,} bytes): copy it again "
                "whole from where the shards were written, or write them again with python -m app shard"
            )


@dataclass(frozen=True)
class Location:
    """A local folder or an S3 prefix (``s3://bucket/prefix``)."""

    url: str
    timeout: float = 10.0

    @property
    def remote(self) -> bool:
        return self.url.startswith("s3://")

    @property
    def bucket(self) -> str:
        return self.url.removeprefix("s3://").split("/", 1)[0]

    @property
    def prefix(self) -> str:
        parts = self.url.removeprefix("s3://").split("/", 1)
        return parts[1].strip("/") if len(parts) > 1 else ""

    def join(self, name: str) -> str:
        """The URL or path of ``name`` inside this location."""
        return f"{self.url.rstrip('/')}/{name}" if self.remote else str(Path(self.url, name))

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def config(self, attempts: int = 1) -> Any:
        """boto3's client settings: each request waits ``timeout`` at most, tried ``attempts`` times."""
        from botocore.config import Config

        retries = {"mode": "standard", "total_max_attempts": attempts}
        return Config(connect_timeout=self.timeout, read_timeout=self.timeout, retries=retries)

    def litdata_options(self) -> dict[str, Any]:
        """LitData's ``storage_options`` (the keywords of its boto3 client): a request that fails is
        tried 3 times (S3's occasional 503), and a dead endpoint ends the read within seconds."""
        return {"config": self.config(attempts=3)}

    # S3: one client with short timeouts; its errors are told apart by type and error code.
    def client(self) -> Any:
        import boto3

        return boto3.session.Session().client("s3", config=self.config())

    def s3_call(self, call: str, **kwargs: Any) -> Any:
        """``client.CALL(**kwargs)``; what the user can fix (no bucket, keys, endpoint) as a DataError."""
        from botocore.exceptions import (
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS's"
        try:
            return getattr(self.client(), call)(**kwargs)
        except NoCredentialsError as err:
            raise DataError(
                f"{self.url}: no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                "(or AWS_PROFILE)"
            ) from err
        except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError) as err:
            raise DataError(
                f"{self.url}: the S3 endpoint {endpoint} did not answer within {self.timeout:g} s; "
                "check AWS_ENDPOINT_URL and that the server is up"
            ) from err
        except ClientError as err:
            code = str(err.response.get("Error", {}).get("Code", ""))
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if (code == "404" and call == "head_bucket") or code == "NoSuchBucket":
                raise DatasetNotFoundError(
                    f"{self.url}: the bucket {self.bucket} does not exist at {endpoint} endpoint; "
                    "create it or fix the URL"
                ) from err
            if code in ("404", "NoSuchKey"):
                raise  # a missing object: the caller's to say what it means
            if status == 403 or code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"):
                raise DataError(
                    f"{self.url}: access denied by {endpoint} endpoint (HTTP 403 {code}); check "
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY and the bucket's permissions"
                ) from err
            raise

    def check_bucket(self) -> None:
        """Raise a DataError where the bucket is missing, the keys are refused or the endpoint is silent."""
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
        if endpoint.startswith("http://"):
            # workaround: LitData sets up obstore for HTTPS only (0.2.76); gone when plain HTTP works
            raise DataError(
                f"{self.url}: AWS_ENDPOINT_URL {endpoint} is plain HTTP; LitData reads and writes shards "
                "over HTTPS only: serve the endpoint over HTTPS (AWS_CA_BUNDLE and SSL_CERT_FILE name a "
                "private CA)"
            )
        self.s3_call("head_bucket", Bucket=self.bucket)

    def is_empty(self) -> bool:
        """Whether nothing is stored here yet (a missing local folder is empty)."""
        if self.remote:
            prefix = f"{self.prefix}/" if self.prefix else ""
            listed = self.s3_call("list_objects_v2", Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
            return listed.get("KeyCount", 0) == 0
        path = Path(self.url)
        return not path.exists() or (path.is_dir() and not any(path.iterdir()))

    def check_writable(self) -> None:
        """Raise a DataError where shards cannot be written here; nothing is left behind by the check."""
        if self.remote:
            self.check_bucket()
            probe = self.key(".write-probe")
            self.s3_call("put_object", Bucket=self.bucket, Key=probe, Body=b"")
            self.s3_call("delete_object", Bucket=self.bucket, Key=probe)
            return
        path = Path(self.url)
        existing = next((p for p in [path, *path.parents] if p.exists()), None)
        if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            where = existing if existing is not None else path
            raise DataError(f"cannot write shards to {self.url}: {where} is not a writable folder")

    def read_json(self, name: str) -> dict | None:
        """The JSON object ``name`` holds, or None where there is no such file."""
        if self.remote:
            from botocore.exceptions import ClientError

            self.check_bucket()
            try:
                body = self.s3_call("get_object", Bucket=self.bucket, Key=self.key(name))["Body"].read()
            except ClientError:  # s3_call re-raises only a missing object
                return None
        else:
            path = Path(self.url, name)
            if not path.is_file():
                return None
            body = path.read_bytes()
        try:
            found = json.loads(body)
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    def write_json(self, name: str, value: dict) -> None:
        body = json.dumps(value, indent=1).encode()
        if self.remote:
            self.s3_call("put_object", Bucket=self.bucket, Key=self.key(name), Body=body)
            return
        path = Path(self.url, name)
        partial = path.with_name(f".{name}.partial")
        partial.write_bytes(body)
        os.replace(partial, path)

    def remove(self) -> None:
        """Delete everything stored here (what a failed write left)."""
        if not self.remote:
            shutil.rmtree(self.url, ignore_errors=True)
            return
        client = self.client()
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=f"{self.prefix}/")
        for page in pages:
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})
