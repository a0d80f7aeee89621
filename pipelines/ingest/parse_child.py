"""The parse child process: both ends of its protocol.

`run_child` starts `python -m pipelines.ingest.parse_child` (a subprocess, not a multiprocessing child: a
Celery prefork worker is daemonic and may not have those) and passes it the request on stdin, so
a password never shows in the process list. The child caps its address space (RLIMIT_AS: the
libraries it loads first, plus max_memory_mb), parses
with pipelines.ingest.pdf_read's `parse_in_child` and writes JSON lines on stdout: progress lines while it
OCRs ({"ocr": [done, total]}), then one reply (the pages, or an error code and sentence). Its
stderr goes to a temporary file, read only for markers of a memory failure (it may quote the
document, so it is never logged). A child killed by a signal that native code's allocators
raise when they run out of memory (_MEMORY_SIGNALS) is refused for memory, not as damaged.

Time: the parent allows `timeout_s`, plus CHECK_PAGE_S for each page the hidden-text check will
render (the child says how many: {"check": pages}), until the first OCR page starts and after
the last one ends, and `ocr_page_timeout_s` plus OCR_PAGE_GRACE_S for each OCR page in between
(the child stops a page itself at `ocr_page_timeout_s` when it can; the grace covers a page stuck
in native code). Past that it kills the child and raises ParseTimeoutError.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.errors import DamagedPdfError, DocumentError, ParseTimeoutError
from pipelines.ingest.limits import DAMAGED, MiB, ParseLimits, memory_error
from pipelines.ingest.pdf_read import parse_in_child

logger = logging.getLogger(__name__)

OCR_PAGE_GRACE_S = 15.0
# Time added to `timeout_s` for each page the hidden-text check renders (about 40 ms of CPU a
# page; the rest is room for a busy host).
CHECK_PAGE_S = 0.1
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_ERRORS_BY_CODE = {cls.code: cls for cls in (DocumentError, *DocumentError.__subclasses__())}
_MEMORY_MARKERS = (b"MemoryError", b"Cannot allocate memory", b"bad_alloc", b"std::bad_alloc")
# How a child under its address-space cap dies when native code runs out of memory: killed
# (SIGKILL), or pdfium's allocator giving up (abort, or a trap instruction: SIGTRAP, SIGILL),
# silently. A damaged file that pdfium cannot read gives an error, not a crash.
_MEMORY_SIGNALS = frozenset(
    -sig for sig in (signal.SIGKILL, signal.SIGABRT, signal.SIGTRAP, signal.SIGILL)
)


def run_child(
    path: Path,
    password: str | None,
    limits: ParseLimits,
    on_ocr_page: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The child's reply for `path` (a dict with "pages"), or the DocumentError it gave."""
    request = {"path": str(path), "password": password, "limits": dataclasses.asdict(limits)}
    with tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "pipelines.ingest.parse_child"],
            # numpy's BLAS is not used here: one thread keeps its reserved memory small.
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=_PACKAGE_ROOT,  # `-m` imports from the working directory: this same code
        )
        try:
            assert child.stdin is not None and child.stdout is not None
            child.stdin.write(json.dumps(request).encode())
            child.stdin.close()
            reply = _read_replies(child, limits, on_ocr_page or (lambda _d, _t: None))
        except BaseException:
            child.kill()
            child.wait()
            raise
        returncode = child.wait()
        if isinstance(reply, dict) and "pages" in reply:
            return reply
        if isinstance(reply, dict) and "code" in reply:
            if "cause" in reply:  # an error the child did not expect: say where, for a fix
                logger.warning("parse child: unexpected %s; refused as damaged", reply["cause"])
            raise _ERRORS_BY_CODE.get(reply["code"], DamagedPdfError)(reply["message"])
        stderr.seek(0)
        tail = stderr.read()
    logger.warning("parse child died: rc=%s stderr_bytes=%d", returncode, len(tail))
    if returncode in _MEMORY_SIGNALS or any(marker in tail for marker in _MEMORY_MARKERS):
        raise memory_error(limits)
    raise DamagedPdfError(DAMAGED)


def _read_replies(
    child: subprocess.Popen[bytes], limits: Any, on_ocr_page: Callable[[int, int], None]
) -> dict[str, Any] | None:
    """Progress lines until the reply (or end of output); ParseTimeoutError past the deadline."""
    assert child.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + limits.timeout_s
    is_in_ocr = False
    buffer = b""
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(timeout=remaining):
                raise _ocr_timeout(limits) if is_in_ocr else _timeout(limits)
            chunk = child.stdout.read1(65536)
            if not chunk:
                return _decode(buffer)
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = _decode(line)
                if message is not None and "check" in message:
                    # The hidden-text check renders every page: it gets time for each.
                    deadline += CHECK_PAGE_S * max(int(message["check"]), 0)
                    continue
                if message is None or "ocr" not in message:
                    return message
                done, total = message["ocr"]
                on_ocr_page(done, total)
                is_in_ocr = done < total
                allowed = limits.sources.ocr_page_timeout_s + OCR_PAGE_GRACE_S
                deadline = time.monotonic() + (allowed if is_in_ocr else limits.timeout_s)
    finally:
        selector.close()


def _decode(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _timeout(limits: Any) -> ParseTimeoutError:
    return ParseTimeoutError(
        f"Reading this PDF took longer than {limits.timeout_s:.0f} seconds, so LongDoc "
        "stopped. The file may be damaged or unusually complex: re-save it from a PDF viewer "
        "and try again."
    )


def _address_space_bytes() -> int:
    """This process's address space now (VmSize); 0 where /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _ocr_timeout(limits: Any) -> ParseTimeoutError:
    allowed = limits.sources.ocr_page_timeout_s + OCR_PAGE_GRACE_S
    return ParseTimeoutError(
        f"Reading a scanned page of this PDF took longer than {allowed:.0f} seconds and could "
        "not be stopped, so LongDoc stopped reading the file. Re-save or rescan it at a lower "
        "resolution and try again, or turn OCR off (LONGDOC_OCR_ENABLED=false)."
    )


def _unexpected_reply(damaged_reply: bytes, error: BaseException) -> bytes:
    """The damaged reply, with where the unexpected error came from for the parent's log: its
    type and the innermost frame of our code (file, line, function), never its message, which
    may quote the document."""
    try:
        frames = traceback.extract_tb(error.__traceback__)
        ours = [f for f in frames if "/pipelines/" in f.filename] or frames
        where = (
            f"{Path(ours[-1].filename).name}:{ours[-1].lineno} in {ours[-1].name}" if ours else ""
        )
        cause = f"{type(error).__module__}.{type(error).__qualname__} at {where}"
        return json.dumps({**json.loads(damaged_reply), "cause": cause}).encode()
    except Exception:  # memory may be short here: the plain reply always goes
        return damaged_reply


def _error_reply(error: DocumentError) -> bytes:
    return json.dumps({"code": error.code, "message": error.message}).encode()


def child_main() -> int:
    import resource

    from pipelines.ingest.page_sources import SourceOptions

    request = json.loads(sys.stdin.buffer.read())
    fields = dict(request["limits"])
    limits = ParseLimits(**{**fields, "sources": SourceOptions(**fields["sources"])})
    # Replies for the worst cases are ready before the cap: writing them needs no new memory.
    memory_reply = _error_reply(memory_error(limits))
    damaged_reply = _error_reply(DamagedPdfError(DAMAGED))
    # The cap is on what reading takes, not on the code: the libraries every parse needs are
    # loaded first (about 150 MB of address space), and the cap counts from there.
    import numpy  # noqa: F401
    import pypdf  # noqa: F401
    import pypdfium2  # noqa: F401

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space_bytes() + limits.max_memory_mb * MiB
    resource.setrlimit(
        resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard)
    )
    reply_stream = sys.stdout.buffer
    sys.stdout = sys.stderr  # stray prints must not corrupt the replies

    def on_ocr_page(done: int, total: int) -> None:
        reply_stream.write(json.dumps({"ocr": [done, total]}).encode() + b"\n")
        reply_stream.flush()

    def on_check(num_pages: int) -> None:
        reply_stream.write(json.dumps({"check": num_pages}).encode() + b"\n")
        reply_stream.flush()

    try:
        reply = parse_in_child(
            Path(request["path"]), request["password"], limits, on_ocr_page, on_check
        )
        encoded = json.dumps(reply, ensure_ascii=False).encode("utf-8", "replace")
    except DocumentError as error:
        encoded = _error_reply(error)
    except MemoryError:
        encoded = memory_reply
    except BaseException as error:  # never a traceback: whatever it was, the caller gets a sentence
        encoded = _unexpected_reply(damaged_reply, error)
    reply_stream.write(encoded + b"\n")
    reply_stream.flush()
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
