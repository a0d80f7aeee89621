"""The CPU flash-attention extension against a float64 reference (explicit scores, mask and
softmax), with GQA, a cached prefix, strided K/V views and large scores."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from engine.attention.cpu_flash import cpu_flash_attention, load_cpu_flash, supports_head_dim

T_VALUES = (1, 3, 17, 64, 200, 513)
START_VALUES = (0, 5, 130, 1000)
HEADS = ((9, 3), (4, 4), (8, 2), (2, 1))  # (query heads, KV heads)
BLOCK_SIZE = 16


def without_the_kernel(test):
    """Marks a test of the loader itself: it runs where the kernel cannot be built too."""
    test.needs_the_kernel = False
    return test


@pytest.fixture(autouse=True)
def extension(request: pytest.FixtureRequest) -> ModuleType | None:
    if not getattr(request.function, "needs_the_kernel", True):
        return None
    ext = load_cpu_flash()
    if ext is None:
        pytest.skip(
            "CPU flash-attention extension unavailable (no AVX-512, or the build failed: "
            "it needs a C++ compiler and ninja on PATH; see the debug log)"
        )
    return ext


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """float64 bottom-right causal attention: q [T, H, D], k/v [S, KV, D] -> [T, H, D]."""
    num_tokens, num_heads, head_dim = q.shape
    num_keys, num_kv, _ = k.shape
    group = num_heads // num_kv
    qg = q.double().reshape(num_tokens, num_kv, group, head_dim)  # [T, KV, G, D]
    scores = torch.einsum("tkgd,skd->kgts", qg, k.double()) / math.sqrt(head_dim)
    visible = torch.arange(num_keys)[None, :] <= torch.arange(num_tokens)[:, None] + start
    scores = scores.masked_fill(~visible, float("-inf"))  # [KV, G, T, S]
    out = torch.einsum("kgts,skd->tkgd", scores.softmax(-1), v.double())
    return out.reshape(num_tokens, num_heads, head_dim)


def paged_kv(
    num_keys: int, num_kv: int, head_dim: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V as views into one [num_blocks * block_size, 2, KV, D] cache, starting one block
    in: token stride 2 * KV * D, not contiguous."""
    num_blocks = num_keys // BLOCK_SIZE + 2
    cache = torch.randn(num_blocks * BLOCK_SIZE, 2, num_kv, head_dim, generator=gen)
    keys = cache[BLOCK_SIZE : BLOCK_SIZE + num_keys]  # [S, 2, KV, D]
    return keys[:, 0], keys[:, 1]


def run_poisoned(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    out = torch.full(q.shape, float("nan"))  # [T, H, D]: NaN wherever the kernel skips a row
    result = cpu_flash_attention(q, k, v, start, out=out)
    assert result.data_ptr() == out.data_ptr()
    assert not out.isnan().any()
    return out


@pytest.mark.parametrize("head_dim", (64, 128))
@pytest.mark.parametrize(("num_heads", "num_kv"), HEADS)
@pytest.mark.parametrize("start", START_VALUES)
@pytest.mark.parametrize("num_tokens", T_VALUES)
def test_matches_reference(
    num_tokens: int, start: int, num_heads: int, num_kv: int, head_dim: int
) -> None:
    gen = torch.Generator().manual_seed(num_tokens * 7919 + start * 31 + num_heads + head_dim)
    q = torch.randn(num_tokens, num_heads, head_dim, generator=gen)
    k, v = paged_kv(start + num_tokens, num_kv, head_dim, gen)
    out = run_poisoned(q, k, v, start)
    assert (out.double() - reference(q, k, v, start)).abs().max().item() <= 1e-5


@pytest.mark.parametrize(("num_tokens", "start"), ((1, 1000), (200, 130), (513, 0)))
def test_large_scores_rescale(num_tokens: int, start: int) -> None:
    """Key norms grow with position, so most key tiles raise a row's running max and the
    accumulator is rescaled again and again; q * 10 puts scores in the tens."""
    gen = torch.Generator().manual_seed(num_tokens + start)
    num_keys, head_dim = start + num_tokens, 64
    q = torch.randn(num_tokens, 8, head_dim, generator=gen) * 10
    k, v = paged_kv(num_keys, 2, head_dim, gen)
    k = k * torch.linspace(0.1, 2.0, num_keys)[:, None, None]
    out = run_poisoned(q, k, v, start)
    # Scores near 100 carry an fp32 rounding error near 1e-5 into the weights, so this bound
    # is looser than the unit-normal one.
    assert (out.double() - reference(q, k, v, start)).abs().max().item() <= 1e-4


def test_contiguous_and_strided_queries() -> None:
    """Plain contiguous K/V, and q as a column slice of a fused QKV projection's output."""
    gen = torch.Generator().manual_seed(3)
    num_tokens, start, num_heads, num_kv, head_dim = 70, 30, 6, 2, 64
    qkv = torch.randn(num_tokens, (num_heads + 2 * num_kv) * head_dim, generator=gen)
    q = qkv[:, : num_heads * head_dim].view(num_tokens, num_heads, head_dim)  # token stride > H*D
    k = torch.randn(start + num_tokens, num_kv, head_dim, generator=gen)
    v = torch.randn(start + num_tokens, num_kv, head_dim, generator=gen)
    out = cpu_flash_attention(q, k, v, start)
    assert out.shape == (num_tokens, num_heads, head_dim) and out.is_contiguous()
    assert (out.double() - reference(q, k, v, start)).abs().max().item() <= 1e-5


@pytest.mark.parametrize("head_dim", (16, 32, 80))
def test_other_head_dims(head_dim: int) -> None:
    gen = torch.Generator().manual_seed(head_dim)
    q = torch.randn(40, 4, head_dim, generator=gen)
    k, v = paged_kv(50, 2, head_dim, gen)
    out = run_poisoned(q, k, v, 10)
    assert (out.double() - reference(q, k, v, 10)).abs().max().item() <= 1e-5


def test_many_heads_per_kv_head() -> None:
    """A group wider than one work item's 48 rows is split across items."""
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(5, 64, 32, generator=gen)
    k, v = paged_kv(25, 1, 32, gen)
    out = run_poisoned(q, k, v, 20)
    assert (out.double() - reference(q, k, v, 20)).abs().max().item() <= 1e-5


def test_thread_count_does_not_change_results() -> None:
    gen = torch.Generator().manual_seed(11)
    q = torch.randn(300, 9, 64, generator=gen)
    k, v = paged_kv(400, 3, 64, gen)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = cpu_flash_attention(q, k, v, 100)
    finally:
        torch.set_num_threads(threads)
    # Each output row is computed by one thread in a fixed order: bitwise equal.
    assert torch.equal(cpu_flash_attention(q, k, v, 100), single)


def test_no_queries() -> None:
    k = torch.randn(8, 2, 64)
    assert cpu_flash_attention(torch.randn(0, 4, 64), k, k, 8).shape == (0, 4, 64)


@pytest.mark.parametrize(
    ("q_shape", "kv_shape", "start", "dtype"),
    (
        ((4, 4, 64), (4, 2, 64), 0, torch.float64),  # not fp32
        ((4, 4, 64), (5, 2, 64), 0, torch.float32),  # S != start + T
        ((4, 3, 64), (4, 2, 64), 0, torch.float32),  # H not a multiple of KV
        ((4, 4, 72), (4, 2, 72), 0, torch.float32),  # head dim not a multiple of 16
    ),
)
def test_rejects_bad_inputs(
    q_shape: tuple[int, ...], kv_shape: tuple[int, ...], start: int, dtype: torch.dtype
) -> None:
    kv = torch.zeros(kv_shape, dtype=dtype)
    with pytest.raises(RuntimeError):
        cpu_flash_attention(torch.zeros(q_shape, dtype=dtype), kv, kv, start)


def test_supports_head_dim() -> None:
    assert [d for d in range(1, 300) if supports_head_dim(d)] == list(range(16, 257, 16))
    gen = torch.Generator().manual_seed(256)
    q = torch.randn(3, 2, 256, generator=gen)
    k, v = paged_kv(3, 1, 256, gen)
    out = run_poisoned(q, k, v, 0)
    assert (out.double() - reference(q, k, v, 0)).abs().max().item() <= 1e-5


@without_the_kernel
def test_unavailable_without_avx512(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert load_cpu_flash.__wrapped__() is None  # uncached: the real result stays cached


@without_the_kernel
def test_unavailable_when_the_build_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.utils.cpp_extension

    def fail(**kwargs: object) -> None:
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr(torch.utils.cpp_extension, "load", fail)
    assert load_cpu_flash.__wrapped__() is None


def test_auto_picks_the_kernel_where_it_serves_the_model() -> None:
    from engine.attention import select_backend
    from engine.errors import EngineError

    cpu = torch.device("cpu")
    assert select_backend("auto", cpu, dtype=torch.float32, head_dim=64).name == "cpu_flash"
    assert select_backend("auto", cpu, dtype=torch.float32, head_dim=72).name == "sdpa"
    assert select_backend("auto", cpu, dtype=torch.bfloat16, head_dim=64).name == "sdpa"
    with pytest.raises(EngineError, match="float32"):
        select_backend("cpu_flash", cpu, dtype=torch.bfloat16, head_dim=64)


@pytest.mark.parametrize("consecutive", [True, False])
def test_backend_steps_over_the_paged_cache_match_reference(consecutive: bool) -> None:
    from engine.attention import AttentionMetadata
    from engine.attention.cpu_flash import CpuFlashBackend

    gen = torch.Generator().manual_seed(7)
    num_heads, num_kv, head_dim, block = 6, 2, 16, 4
    num_tokens = 22
    q = torch.randn(num_tokens, num_heads, head_dim, generator=gen)
    k = torch.randn(num_tokens, num_kv, head_dim, generator=gen)
    v = torch.randn(num_tokens, num_kv, head_dim, generator=gen)
    table = [3, 4, 5, 6, 7, 8] if consecutive else [9, 2, 14, 0, 5, 11]
    table_t = torch.tensor(table, dtype=torch.int32)
    k_cache = torch.zeros(16, block, num_kv, head_dim)
    v_cache = torch.zeros(16, block, num_kv, head_dim)
    backend = CpuFlashBackend()
    for start, end in [(0, 9), (9, 10), (10, 17), (17, 22)]:
        positions = torch.arange(start, end)
        slots = table_t[positions // block].long() * block + positions % block
        meta = AttentionMetadata(
            start=start,
            num_query_tokens=end - start,
            slot_mapping=slots,
            block_table=table_t,
            block_size=block,
            first_block_if_contiguous=table[0] if consecutive else None,
        )
        out = backend.forward(q[start:end], k[start:end], v[start:end], k_cache, v_cache, meta)
        expected = reference(q[start:end], k[:end], v[:end], start)
        assert (out.double() - expected).abs().max().item() < 1e-5, (start, end)


def test_paged_decode_matches_sdpa_per_row_with_shuffled_blocks_and_padding() -> None:
    from engine.attention.cpu_flash import cpu_paged_decode, load_cpu_flash

    if load_cpu_flash() is None:
        pytest.skip("the CPU flash-attention extension is unavailable on this CPU")
    torch.manual_seed(3)
    block_size, kv_heads, heads, dim = 16, 3, 9, 64
    k_cache = torch.randn(40, block_size, kv_heads, dim)
    v_cache = torch.randn(40, block_size, kv_heads, dim)
    lengths = [1, 15, 16, 17, 100, 0, 333]
    order = torch.randperm(40).tolist()
    tables, cursor = [], 0
    for length in lengths:
        n = -(-length // block_size)
        tables.append(order[cursor : cursor + n] + [0] * (22 - n))
        cursor += n
    q = torch.randn(len(lengths), heads, dim)
    out = cpu_paged_decode(
        q,
        k_cache,
        v_cache,
        torch.tensor(tables, dtype=torch.int32),
        torch.tensor(lengths, dtype=torch.int32),
    )
    for row, length in enumerate(lengths):
        if length == 0:
            assert torch.equal(out[row], torch.zeros(heads, dim))
            continue
        blocks = torch.tensor(tables[row][: -(-length // block_size)])
        keys = k_cache[blocks].reshape(-1, kv_heads, dim)[:length]
        values = v_cache[blocks].reshape(-1, kv_heads, dim)[:length]
        expected = torch.nn.functional.scaled_dot_product_attention(
            q[row][None, :, None],  # [1, H, 1, D]
            keys.transpose(0, 1)[None],
            values.transpose(0, 1)[None],
            enable_gqa=True,
        )[0, :, 0]
        torch.testing.assert_close(out[row], expected, atol=1e-5, rtol=1e-4)


@without_the_kernel
def test_the_build_sees_the_caller_s_path_and_leaves_it_alone(tmp_path) -> None:
    """The engine reads and writes no environment: PATH is its caller's (the worker's,
    worker/model/kernel_build.py), even during the build. Without ninja there, loading gives None."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    script = (
        "import os, torch, torch.utils.cpp_extension as cpp\n"
        "torch.backends.cpu.get_cpu_capability = lambda: 'AVX512'  # reach the build anywhere\n"
        "real_load, seen = cpp.load, []\n"
        "def load(**kwargs):\n"
        "    seen.append(os.environ['PATH'])\n"
        "    return real_load(**kwargs)\n"
        "cpp.load = load\n"
        "before = dict(os.environ)\n"
        "from engine.attention.cpu_flash import load_cpu_flash\n"
        "assert load_cpu_flash() is None\n"
        "assert seen == [before['PATH']], seen\n"
        "assert dict(os.environ) == before\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(repo),
        "PATH": str(tmp_path),  # an empty folder: no ninja, no compiler
        "TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions"),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_stale_build_lock_is_removed_not_waited_on(tmp_path: Path) -> None:
    """torch waits forever on its `lock` file; one left by a killed build must not hang the
    next load (it hung a CI run for 90 minutes)."""
    from engine.attention.cpu_flash import build_lock

    (tmp_path / "lock").write_text("")  # left by a process that was killed mid-build
    with build_lock(tmp_path):
        assert not (tmp_path / "lock").exists()
        (tmp_path / "lock").write_text("")  # torch's own, taken while we hold the flock
        # A second builder waits for the flock instead of removing the live build's lock.
        repo = Path(__file__).resolve().parents[2]
        script = (
            "import sys\n"
            "from pathlib import Path\n"
            "from engine.attention.cpu_flash import build_lock\n"
            "with build_lock(Path(sys.argv[1])):\n"
            "    pass\n"
        )
        waiting = subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path)],
            env={**os.environ, "PYTHONPATH": str(repo)},
        )
        with pytest.raises(subprocess.TimeoutExpired):
            waiting.wait(timeout=1.0)  # still waiting: the flock is held
        assert (tmp_path / "lock").exists()
        (tmp_path / "lock").unlink()  # the live build ends and removes its lock
    assert waiting.wait(timeout=120) == 0
