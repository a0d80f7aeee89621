"""Host time of one engine step at batch 64, by phase, on the CPU with a stub forward.

    PYTHONPATH=. .venv/bin/python bench/step_overhead.py --batch 64 --context 4096

What a decode step costs the host besides the model: scheduling, building the step's inputs
(ids, positions, slot mapping, block tables), the CUDA-graph input copies, sampling, taking the
tokens (stop and length checks) and the text (detokenizer, stop strings, loop detector). The
engine is the real one; only the model's forward is replaced by a stub that returns logits from
a bank of random rows, so the step's remaining time is host work. A tiny random Llama checkpoint
(one layer, vocabulary 4,096) keeps the KV cache small; sampling sees real [B, V] logits.

"graph fill" times the CUDA-graph runner's input copies (engine/cuda_graphs.py) on the step's
rows with CPU buffers: on CUDA they are the same host work plus the H2D copies' launches.
Times are CPU seconds of the engine's thread (time.thread_time), with torch on one thread: on a
shared machine wall time counts other processes' work. Phases are timed by wrapping the engine's methods; a phase absent from this checkout is skipped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench._models import write_config_and_tokenizer, write_weights  # noqa: E402
from engine import EngineConfig, LLMEngine, SamplingParams  # noqa: E402

VOCAB = 4096
# CPU time of this thread, not wall time: the machine is shared, and another process's load
# would land in whichever phase it interrupted. Torch runs on this thread alone (see main).
CLOCK = time.thread_time
TEXT_IDS = 256  # the word-level tokenizer knows ids 3..255: the stub samples among them
# (label, path from the engine to the object, method): the phases, in step order.
PHASES = (
    ("schedule", "_main.scheduler", "schedule"),
    ("inputs", "_main.runner", "prepare_inputs"),
    ("runner (host)", "_main.runner", "run"),
    ("model stub", "_main.runner.model", "forward"),
    ("sample", "_main.runner", "sample"),
    ("read tokens", "_pipelines.main", "_read"),
    ("text", "", "_process_text"),
    # The same phases where the step pipeline prepared the inputs and sampled (before issue 27).
    ("inputs", "_pipelines.main", "_inputs"),
    ("sample", "_pipelines.main", "_sample"),
    # The same phases where the step loop still lived in LLMEngine (before engine/step_pipeline.py).
    ("inputs", "", "_inputs"),
    ("sample", "", "_sample"),
    ("take tokens", "", "_take_tokens"),
    ("complete", "_main.scheduler", "complete"),
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of --steps steps")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "bench-cache")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--engine-option", nargs="*", default=[], help="key=value, e.g. a flag")
    return parser.parse_args()


def tiny_checkpoint(folder: Path) -> Path:
    from transformers import AutoModelForCausalLM, LlamaConfig

    if (folder / "model.safetensors").is_file():
        return folder
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=VOCAB,
        max_position_embeddings=262144,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    write_config_and_tokenizer(model, folder)
    write_weights(model, folder)
    return folder


class StubForward:
    """The model's forward: logits [N, V] from a bank of random rows (only ids the tokenizer
    knows can win, so the detokenizer makes real text)."""

    def __init__(self, bank_rows: int = 4099) -> None:
        g = torch.Generator().manual_seed(0)
        bank = torch.randn(bank_rows, VOCAB, generator=g)
        bank[:, TEXT_IDS:] = -1e9
        bank[:, :3] = -1e9
        self.bank = bank
        self.cursor = 0

    def __call__(self, input_ids, positions, attention, logits_indices=None):
        n = input_ids.shape[0] if logits_indices is None else logits_indices.shape[0]
        # Rows taken modulo a prime: a request's tokens do not repeat for thousands of steps
        # (a shorter cycle would be a loop, and the loop detector would end the request).
        index = (torch.arange(n) + self.cursor) % self.bank.shape[0]
        self.cursor += n + 1
        return self.bank.index_select(0, index)


def _resolve(root: object, path: str) -> object | None:
    obj = root
    for name in filter(None, path.split(".")):
        obj = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
        if obj is None:
            return None
    return obj


def install_timers(engine: LLMEngine, totals: dict[str, float]) -> list[str]:
    installed = []
    seen: set[tuple[int, str]] = set()
    for label, path, method in PHASES:
        owner = _resolve(engine, path)
        if owner is None or not hasattr(owner, method) or (id(owner), method) in seen:
            continue
        seen.add((id(owner), method))
        original = getattr(owner, method)

        def timed(*args, _original=original, _label=label, **kwargs):
            started = CLOCK()
            try:
                return _original(*args, **kwargs)
            finally:
                totals[_label] += CLOCK() - started

        setattr(owner, method, timed)
        installed.append(label)
    return installed


def graph_fill_seconds(engine: LLMEngine, batch: int, num_steps: int) -> float | None:
    """The CUDA-graph runner's input copies for the running rows, with CPU buffers."""
    from engine.cuda_graphs import DecodeGraphs
    from engine.step_inputs import ChunkInput

    runner = engine._main.runner
    graphs = DecodeGraphs(runner, max_num_seqs=batch, max_model_len=engine.max_model_len)
    seqs = sorted(engine._main.scheduler.running, key=lambda s: s.request_id)
    chunks = [
        ChunkInput([max(0, s.token_ids[-1])], s.num_tokens - 2, s.block_table, "last") for s in seqs
    ]
    bucket = min(b for b in graphs.buckets if b >= len(chunks))
    fill = graphs._fill
    fill(chunks, bucket)  # warm: the host copy of the block tables is filled once
    started = CLOCK()
    for step in range(num_steps):
        # A new position every step, as decoding gives (same tables, one more token).
        moved = [ChunkInput(c.token_ids, c.start - step % 2, c.block_table, "last") for c in chunks]
        fill(moved, bucket)
    return (CLOCK() - started) / num_steps


def main() -> int:
    args = parse_args()
    torch.set_num_threads(1)  # host work of a GPU step is single-threaded; no OpenMP waits
    folder = tiny_checkpoint(args.cache_dir / "step-overhead-llama")
    options = dict(
        device="cpu",
        max_model_len=args.context + args.steps * (args.repeats + 1) + 64,
        max_num_seqs=args.batch,
        chunk_size=8192,
        min_chunk_size=32,
        admission_window_s=0.0,
        enable_prefix_cache=True,
    )
    for item in args.engine_option:
        key, value = item.split("=", 1)
        options[key] = json.loads(value)
    bytes_per_token = 2 * 1 * 1 * 32 * 4
    options["max_kv_cache_bytes"] = bytes_per_token * args.batch * (options["max_model_len"] + 32)
    engine = LLMEngine(EngineConfig(model_path=folder, **options))
    engine._main.runner.model.forward = StubForward()
    g = torch.Generator().manual_seed(1)
    params = SamplingParams(
        max_new_tokens=args.steps * (args.repeats + 1) + 32,
        ignore_eos=True,
        stop_strings=("\n\n\n",),  # never produced: the stop-string filter still runs
        max_phrase_repeats=0,  # random words may repeat a phrase: keep every request going
    )
    for _ in range(args.batch):
        prompt = torch.randint(3, TEXT_IDS, (args.context,), generator=g).tolist()
        engine.add_request(prompt, params)
    while engine._main.scheduler.waiting or any(
        not s.is_decoding for s in engine._main.scheduler.running
    ):
        engine.step()
    for _ in range(args.steps // 4):
        engine.step()  # warm up
    totals: dict[str, float] = defaultdict(float)
    installed = install_timers(engine, totals)
    step_times: list[float] = []
    wall_times: list[float] = []
    for _ in range(args.repeats):
        started, wall_started = CLOCK(), time.perf_counter()
        for _ in range(args.steps):
            engine.step()
        step_times.append((CLOCK() - started) / args.steps)
        wall_times.append((time.perf_counter() - wall_started) / args.steps)
    num_timed = args.steps * args.repeats
    assert len(engine._main.scheduler.running) == args.batch, "a request ended early"
    phases = {label: totals[label] / num_timed * 1e3 for label in dict.fromkeys(installed)}
    if "runner (host)" in phases and "model stub" in phases:
        phases["runner (host)"] -= phases["model stub"]
    fill = graph_fill_seconds(engine, args.batch, args.steps)
    step_ms = statistics.median(step_times) * 1e3
    figures = {
        "batch": args.batch,
        "context": args.context,
        "steps": num_timed,
        "decode_attention": engine._main.runner.decode_attention.name,
        "engine_options": args.engine_option,
        "step_ms_median": round(step_ms, 3),
        "step_ms_runs": [round(t * 1e3, 3) for t in step_times],
        "wall_ms_runs": [round(t * 1e3, 3) for t in wall_times],
        "torch_threads": torch.get_num_threads(),
        "phases_ms": {k: round(v, 3) for k, v in phases.items()},
        "graph_fill_ms": None if fill is None else round(fill * 1e3, 3),
    }
    print(f"| phase | ms per step (batch {args.batch}, context {args.context}) |")
    print("|---|---|")
    for label, value in phases.items():
        print(f"| {label} | {value:.3f} |")
    print(f"| graph fill (CUDA path's input copies, CPU buffers) | {figures['graph_fill_ms']} |")
    print(f"| **whole step** (median of {args.repeats} runs) | **{step_ms:.3f}** |")
    print(f"wall clock per step: {', '.join(f'{t * 1e3:.2f}' for t in wall_times)} ms")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
