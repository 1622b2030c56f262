"""A real PostgreSQL server on 127.0.0.1 (Debian's ``postgresql`` package, which ``make test`` installs),
in a temporary folder, with one database ``tune`` that the user ``tune`` reaches without a password."""

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from helpers.cli import free_port


def binaries() -> Path | None:
    """The folder of ``initdb`` and ``postgres``: on PATH, else Debian's newest."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    return Path(folders[-1]) if folders else None


class PostgresServer:
    """``postgres`` started in a temporary folder; ``url`` reaches its database."""

    def __init__(self, timeout: float = 60) -> None:
        self.bin = bin = binaries()
        if bin is None:
            raise RuntimeError("no PostgreSQL server: apt-get install postgresql (make test does)")
        self.folder = Path(tempfile.mkdtemp(prefix="postgres-"))
        # PostgreSQL refuses to run as root: the package's own user runs it then.
        self.as_user = as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if as_user:
            shutil.chown(self.folder, "postgres")
        data = self.folder / "data"
        subprocess.run(
            [*as_user, str(bin / "initdb"), "-D", str(data), "-U", "tune", "-A", "trust", "--no-sync"],
            check=True,
            capture_output=True,
        )
        self.port = free_port()
        self.start(timeout)
        self.psql("CREATE DATABASE tune").check_returncode()
        self.url = f"postgresql://tune@127.0.0.1:{self.port}/tune"

    def start(self, timeout: float = 60) -> None:
        """Start the server on its data folder and port; return once it answers."""
        self.process = subprocess.Popen(
            [
                *self.as_user,
                str(self.bin / "postgres"),
                "-D",
                str(self.folder / "data"),
                "-p",
                str(self.port),
                "-h",
                "127.0.0.1",
                "-k",
                str(self.folder),
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.folder / "server.log", "a"),  # noqa: SIM115 (the server's, closed at exit)
        )
        deadline = time.monotonic() + timeout
        while self.psql("SELECT 1").returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"PostgreSQL did not start: {(self.folder / 'server.log').read_text()}")
            time.sleep(0.2)

    def halt(self) -> None:
        """Stop the server (its data kept) as ``pg_ctl stop`` does: connections end, new ones are refused."""
        stop = [str(self.bin / "pg_ctl"), "stop", "-D", str(self.folder / "data"), "-m", "fast", "-w"]
        subprocess.run([*self.as_user, *stop], check=True, capture_output=True)
        self.process.wait(30)

    def psql(self, sql: str) -> subprocess.CompletedProcess:
        """``sql`` run by ``psql`` in this server's ``postgres`` database."""
        server = ["-h", "127.0.0.1", "-p", str(self.port), "-U", "tune", "-d", "postgres"]
        return subprocess.run([str(binaries() / "psql"), *server, "-c", sql], capture_output=True)

    def new_database(self, name: str) -> str:
        """A new, empty database on this server; its URL."""
        self.psql(f"CREATE DATABASE {name}").check_returncode()
        return f"postgresql://tune@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
