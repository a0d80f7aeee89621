"""The worker puts the ninja wheel's folder on PATH for torch's kernel build, only when PATH
has no ninja of its own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import ninja
import pytest

from worker.model.kernel_build import put_ninja_on_path


def test_the_wheel_s_ninja_is_added_when_path_has_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    put_ninja_on_path()
    assert os.environ["PATH"] == os.pathsep.join([ninja.BIN_DIR, str(tmp_path)])
    assert shutil.which("ninja") is not None


def test_a_ninja_already_on_path_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    own = tmp_path / "ninja"
    own.write_text("#!/bin/sh\n")
    own.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    put_ninja_on_path()
    assert os.environ["PATH"] == str(tmp_path)


@pytest.mark.parametrize(("loaded", "said"), [(object(), "built"), (None, "off (SDPA kept)")])
def test_build_now_builds_with_ninja_on_path_and_says_how_it_went(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    loaded: object,
    said: str,
) -> None:
    from engine.attention import cpu_flash
    from worker.model.kernel_build import build_now

    paths: list[str] = []

    def load() -> object:
        paths.append(os.environ["PATH"])
        return loaded

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(cpu_flash, "load_cpu_flash", load)
    build_now()
    assert paths == [os.pathsep.join([ninja.BIN_DIR, str(tmp_path)])]
    assert capsys.readouterr().out == f"CPU flash attention: {said}\n"
