"""bm25s must not start JAX on the GPU: where JAX is installed, importing bm25s runs a top-k
through it, and JAX then reserves 75% of the card (59 GB of an H100) before the engine loads.

JAX is not installed on this machine, so a stand-in `jax` package on the path records which
platforms JAX was told to use when bm25s imported it; the import order is what is under test."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _jax_platforms_seen_by_jax(tmp_path: Path, preset: str | None) -> str:
    package = tmp_path / "jax"
    package.mkdir()
    seen = tmp_path / "seen.txt"
    (package / "__init__.py").write_text(
        textwrap.dedent(
            f"""
            import os
            from pathlib import Path
            Path({str(seen)!r}).write_text(os.environ.get("JAX_PLATFORMS", "<unset>"))
            """
        )
    )
    (package / "lax.py").write_text(
        "import numpy as np\n"
        "def top_k(x, k):\n"
        "    x = np.asarray(x)\n"
        "    i = np.argsort(-x, kind='stable')[:k]\n"
        "    return x[i], i\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "JAX_PLATFORMS"}
    if preset is not None:
        env["JAX_PLATFORMS"] = preset
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    subprocess.run(
        [sys.executable, "-c", "import pipelines.retrieval.bm25, pipelines.values.claims"],
        env=env,
        check=True,
        timeout=300,
    )
    return seen.read_text()


def test_jax_is_pointed_at_the_cpu_before_bm25s_imports_it(tmp_path: Path) -> None:
    assert _jax_platforms_seen_by_jax(tmp_path, None) == "cpu"


def test_a_platform_the_person_chose_is_kept(tmp_path: Path) -> None:
    assert _jax_platforms_seen_by_jax(tmp_path, "cuda") == "cuda"


def test_bm25s_is_imported_through_the_guard_only() -> None:
    for path in ROOT.joinpath("pipelines").rglob("*.py"):
        if path.name == "bm25s_lib.py":
            continue
        text = path.read_text()
        assert "import bm25s" not in text and "from bm25s" not in text, path
