"""A real server that a test starts as a subprocess (llama.cpp's, `transformers serve`,
`longdoc serve`): on a free port of 127.0.0.1, its output in a log file, waited for until a GET
answers, stopped at the end (terminate, then kill after a grace period).

The wait only catches a hang: its limit is generous and says nothing of speed. A server that
exits while it is waited for fails the test at once, with the end of its log."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

HANG_TIMEOUT_S = 900.0  # a start this slow is a hang, however busy the machine
STOP_GRACE_S = 30.0
LOG_TAIL_LINES = 40


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class RealServer:
    name: str
    port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as error:
            return f"(no log: {error})"
        return "\n".join(text.splitlines()[-lines:])


@contextmanager
def real_server(
    name: str,
    command: Sequence[str],
    *,
    port: int,
    log_path: Path,
    ready_path: str = "/v1/models",
    ready: Callable[[httpx.Response], bool] = lambda response: response.status_code == 200,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    start_new_session: bool = False,
    hang_timeout_s: float = HANG_TIMEOUT_S,
    grace_s: float = STOP_GRACE_S,
) -> Iterator[RealServer]:
    """`command` (which listens on `port`) started, yielded once GET `ready_path` gives a
    response that `ready` accepts, and stopped when the block ends, however it ends."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [str(part) for part in command],
            env=env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=start_new_session,
        )
    server = RealServer(name, port, process, log_path)
    try:
        _wait_until_ready(server, ready_path, ready, hang_timeout_s)
        yield server
    finally:
        _stop(process, grace_s)


def _wait_until_ready(
    server: RealServer,
    path: str,
    ready: Callable[[httpx.Response], bool],
    hang_timeout_s: float,
) -> None:
    deadline = time.monotonic() + hang_timeout_s
    while True:
        if server.process.poll() is not None:
            pytest.fail(
                f"{server.name} exited ({server.process.returncode}) before it answered; "
                f"end of {server.log_path}:\n{server.log_tail()}",
                pytrace=False,
            )
        try:
            if ready(httpx.get(f"{server.url}{path}", timeout=10)):
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(
                f"{server.name} did not answer GET {path} in {hang_timeout_s:.0f} s (a hang); "
                f"end of {server.log_path}:\n{server.log_tail()}",
                pytrace=False,
            )
        time.sleep(0.5)


def _stop(process: subprocess.Popen, grace_s: float) -> None:
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
