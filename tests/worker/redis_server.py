"""A real redis-server of the test's own, on a spare port, that a test may stop and start."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

READY_TIMEOUT_S = 10.0


def spare_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """`redis-server` on 127.0.0.1:<spare port>, keeping nothing on disk."""

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        self.binary, self.folder, self.port = binary, folder, spare_port()
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._log = log = (self.folder / "redis.log").open("ab")
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(
            [self.binary, *args, "--dir", str(self.folder)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def llen(self, key: str) -> int:
        import redis

        return int(redis.Redis.from_url(self.url).llen(key))


@pytest.fixture
def redis_server(tmp_path: Path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()
