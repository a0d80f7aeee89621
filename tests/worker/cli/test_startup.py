"""The `longdoc` command starts without torch or transformers: a command that runs no model (help,
health, docs, users) answers in a second or two, not after loading the model stack."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_importing_the_cli_loads_no_model_stack() -> None:
    code = (
        "import sys, worker.cli.main\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_the_engine_package_still_exports_its_names() -> None:
    import engine

    for name in engine.__all__:
        assert getattr(engine, name) is not None
