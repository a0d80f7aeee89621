"""The sign-in limits on their own: per client, for everyone, the window, and hashing at once."""

from __future__ import annotations

import threading
import time

import pytest

from ui.sign_in_limits import SignInLimiter, SignInRefused
from ui.upload_gate import upload_session_id


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_client_is_locked_out_after_its_failures_until_they_age_out() -> None:
    clock = Clock()
    limiter = SignInLimiter(max_client_failures=3, window_s=600, clock=clock)
    for _ in range(3):
        limiter.check("10.0.0.5")
        limiter.record_failure("10.0.0.5")
        clock.now += 60

    with pytest.raises(SignInRefused, match="sign-in is locked for 7 more minutes"):
        limiter.check("10.0.0.5")
    limiter.check("10.0.0.6")  # another client is not affected
    clock.now += 7 * 60  # the first failure is now ten minutes old
    limiter.check("10.0.0.5")


def test_a_right_password_clears_the_client_s_record() -> None:
    limiter = SignInLimiter(max_client_failures=2, clock=Clock())
    limiter.record_failure("a")
    limiter.record_success("a")
    limiter.record_failure("a")
    limiter.check("a")


def test_many_clients_together_pause_every_sign_in() -> None:
    clock = Clock()
    limiter = SignInLimiter(max_client_failures=5, max_global_failures=10, clock=clock)
    for address in range(10):  # one guess each from ten addresses
        limiter.record_failure(f"10.0.1.{address}")

    with pytest.raises(SignInRefused, match="paused for everyone for 15 more minutes"):
        limiter.check("10.0.9.9")


def test_no_more_than_two_passwords_are_hashed_at_once() -> None:
    limiter = SignInLimiter(max_concurrent_hashes=2, hash_wait_s=5)
    running, peak, lock = [0], [0], threading.Lock()

    def sign_in() -> None:
        with limiter.hashing():
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=sign_in) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak[0] == 2


def test_a_sign_in_that_waits_too_long_for_hashing_is_told_to_try_again() -> None:
    limiter = SignInLimiter(max_concurrent_hashes=1, hash_wait_s=0.05)
    with limiter.hashing(), pytest.raises(SignInRefused, match="busy"), limiter.hashing():
        pass


@pytest.mark.parametrize(
    ("path", "session_id"),
    [
        ("/_stcore/upload_file/abc-123/f1", "abc-123"),
        ("/base/_stcore/upload_file/abc/f1", "abc"),
        ("/_stcore/health", None),
        ("/", None),
    ],
)
def test_upload_paths(path: str, session_id: str | None) -> None:
    assert upload_session_id(path) == session_id
