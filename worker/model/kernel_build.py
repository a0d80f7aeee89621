"""What torch needs on PATH to build the engine's CPU attention kernel, set by the worker.

torch builds engine/attention/cpu_flash.py's kernel by running `ninja` from PATH, on every
process's first load too (to check the cached binary). The `ninja` wheel, an engine dependency,
puts its executable in the virtual environment's bin folder, which is not on PATH when
.venv/bin/longdoc runs without the environment activated. The engine reads and writes no
environment; the worker owns its process's, so it adds the folder before it builds the engine.

`python -m worker.model.kernel_build` builds the kernel now and says so (make venv runs it, so no
request waits ~20 s for it).
"""

from __future__ import annotations

import logging
import os
import shutil


def put_ninja_on_path() -> None:
    """Add the ninja wheel's folder to PATH when no `ninja` is found there (else leave PATH
    as it is). Without either, the kernel is not built and the engine runs SDPA."""
    if shutil.which("ninja") is not None:
        return
    try:
        import ninja
    except ImportError:
        return
    os.environ["PATH"] = os.pathsep.join(filter(None, [ninja.BIN_DIR, os.environ.get("PATH")]))


def build_now() -> None:
    """Build the CPU attention kernel (or say why it stays off) into torch's extensions cache."""
    from engine.attention import cpu_flash

    logging.basicConfig(level=logging.INFO)
    cpu_flash.logger.setLevel(logging.DEBUG)  # the reason, where it stays off
    put_ninja_on_path()
    built = cpu_flash.load_cpu_flash() is not None
    print("CPU flash attention:", "built" if built else "off (SDPA kept)")


if __name__ == "__main__":
    build_now()
