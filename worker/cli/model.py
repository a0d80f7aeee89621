"""`longdoc model check PATH`: run a checkpoint folder through our engine and through transformers
on the same weights, print the largest logit difference and whether greedy outputs agree, and
exit with status 1 when they do not (or when either cannot load it).

For anyone bringing a checkpoint: a family or setting the engine does not run is refused with a
sentence when it loads; this check shows that what it does run computes what transformers does.
The prompt is a fixed sentence in the checkpoint's own chat template (plain text when it has
none); both sides decode greedily for --tokens tokens, ignoring end-of-sequence tokens, and the
logits of every position of the prompt and of the reference's answer are compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from worker.cli.common import console, error_console

commands = typer.Typer()
model_cli = typer.Typer(help="Check a model checkpoint before serving it.", no_args_is_help=True)
commands.add_typer(model_cli, name="model")

CHECK_MESSAGES = [
    {
        "role": "user",
        "content": "Summarise the clause: the tenant pays the rent on the first day of each month.",
    }
]
PLAIN_PROMPT = "The tenant pays the rent on the first day of each month, and the landlord"

# The largest logit difference allowed, relative to the reference's largest logit magnitude.
# Both sides compute the same products and differ in summation order (and kernels) only: in
# float32 that is ~1e-7 relative per operation, so 1e-3 leaves four orders of magnitude for a few
# dozen layers; in bfloat16 (unit roundoff 3.9e-3) each layer's activations round separately on
# the two sides, so 5e-2 is about a dozen roundings. A real fault (a missing bias, a wrong RoPE
# scaling, q/k norms skipped) moves logits by tens of percent.
TOLERANCE = {"float32": 1e-3, "bfloat16": 5e-2, "float16": 2e-2}


class CheckFailed(Exception):
    """A side could not load or run the checkpoint: its sentence."""


@dataclass(frozen=True)
class CheckResult:
    model_type: str
    num_layers: int
    prompt_tokens: int
    max_abs_diff: float
    max_rel_diff: float  # max_abs_diff / the reference's largest |logit|
    tolerance: float
    engine_tokens: list[int]
    reference_tokens: list[int]

    @property
    def greedy_agree(self) -> bool:
        return self.engine_tokens == self.reference_tokens

    @property
    def first_difference(self) -> int:
        """The index of the first token where the two greedy outputs differ."""
        pairs = zip(self.engine_tokens, self.reference_tokens, strict=False)
        return next((i for i, (a, b) in enumerate(pairs) if a != b), len(self.engine_tokens))

    @property
    def ok(self) -> bool:
        return self.greedy_agree and self.max_rel_diff <= self.tolerance


@model_cli.command("check")
def check(
    path: Annotated[Path, typer.Argument(help="A checkpoint folder (config.json, safetensors).")],
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    tokens: Annotated[int, typer.Option("--tokens", min=1, help="Greedy tokens to compare.")] = 16,
    dtype: Annotated[
        str, typer.Option("--dtype", help="float32, bfloat16 or float16 (both sides).")
    ] = "float32",
    reference: Annotated[
        Path | None,
        typer.Option(
            "--reference",
            help="The folder transformers loads (default: PATH): e.g. the original of a copy.",
        ),
    ] = None,
) -> None:
    """Compare our engine with transformers on a checkpoint; exit status 1 when they differ."""
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        _fail(f"The device must be cpu or cuda, not {device!r}.")
    if dtype not in TOLERANCE:
        _fail(f"The dtype must be one of {', '.join(TOLERANCE)}, not {dtype!r}.")
    try:
        result = compare_checkpoint(
            path, device=device, dtype=dtype, num_tokens=tokens, reference=reference
        )
    except CheckFailed as exc:
        _fail(str(exc))
    _report(path, device, dtype, result)
    if not result.ok:
        error_console.print(
            "[red]Our engine and transformers disagree on this checkpoint.[/red]", soft_wrap=True
        )
        raise typer.Exit(1)
    console.print("Our engine and transformers agree on this checkpoint.")


def compare_checkpoint(
    path: Path,
    *,
    device: str,
    dtype: str,
    num_tokens: int,
    reference: Path | None = None,
) -> CheckResult:
    import torch

    from engine import EngineConfig, EngineError, LLMEngine, SamplingParams

    try:
        engine = LLMEngine(
            EngineConfig(
                model_path=path,
                device=device,
                dtype=dtype,
                enable_prefix_cache=False,
                min_chunk_size=1,
                max_model_len=None,
            )
        )
        prompt = _prompt(engine)
        room = engine.max_model_len - num_tokens - 1
        if room < 1:
            raise CheckFailed(
                f"The model takes {engine.max_model_len} tokens; ask for fewer --tokens."
            )
        prompt = prompt[-room:]
        ours = engine.generate(
            prompt, SamplingParams(max_new_tokens=num_tokens, ignore_eos=True, stop_on_loop=False)
        ).token_ids
    except EngineError as exc:
        raise CheckFailed(f"Our engine cannot run {path}: {exc}") from exc
    hf_model = _load_reference(reference or path, device, getattr(torch, dtype))
    theirs, reference_logits = _reference_greedy(hf_model, prompt, num_tokens, engine.device)
    try:
        logits = engine.prefill_logits(prompt + theirs[:-1], all_positions=True)
    except EngineError as exc:
        raise CheckFailed(f"Our engine cannot run {path}: {exc}") from exc
    diff = (logits.float().cpu() - reference_logits).abs().max().item()
    scale = reference_logits.abs().max().item() or 1.0
    return CheckResult(
        model_type=engine.model_args.model_type,
        num_layers=engine.model_args.num_layers,
        prompt_tokens=len(prompt),
        max_abs_diff=diff,
        max_rel_diff=diff / scale,
        tolerance=TOLERANCE[dtype],
        engine_tokens=list(ours),
        reference_tokens=theirs,
    )


def _prompt(engine: Any) -> list[int]:
    if getattr(engine.tokenizer, "chat_template", None):
        return engine.apply_chat_template(CHECK_MESSAGES)
    return list(engine.tokenizer(PLAIN_PROMPT)["input_ids"])


def _load_reference(folder: Path, device: str, dtype: Any) -> Any:
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError, ...
        raise CheckFailed(f"transformers cannot load {folder}: {exc}") from exc
    return model.to(device).eval()


def _reference_greedy(
    hf_model: Any, prompt: list[int], num_tokens: int, device: Any
) -> tuple[list[int], Any]:
    """transformers' greedy tokens (end-of-sequence ignored, as ours) and its fp32 logits [N, V]
    of every position of the prompt and the answer but its last token, on the CPU. Each step
    runs the whole sequence: no cache, whose API differs between transformers releases."""
    import torch

    tokens: list[int] = []
    with torch.no_grad():
        for _ in range(num_tokens):
            ids = torch.tensor([prompt + tokens], device=device)
            logits = hf_model(ids, use_cache=False).logits[0].float().cpu()  # [T, V]
            tokens.append(int(logits[-1].argmax()))
    return tokens, logits


def _report(path: Path, device: str, dtype: str, result: CheckResult) -> None:
    console.print(
        f"Checkpoint {escape(str(path))}: {result.model_type}, {result.num_layers} layers, "
        f"{dtype} on {device}.",
        soft_wrap=True,
    )
    console.print(
        f"Prompt: {result.prompt_tokens} tokens; {len(result.reference_tokens)} greedy tokens "
        "compared."
    )
    mark = "ok" if result.max_rel_diff <= result.tolerance else "too large"
    console.print(
        f"Largest logit difference: {result.max_abs_diff:.3g} "
        f"({result.max_rel_diff:.3g} of the largest logit; allowed {result.tolerance:g}): {mark}."
    )
    if result.greedy_agree:
        console.print(f"Greedy outputs agree: all {len(result.engine_tokens)} tokens.")
    else:
        console.print(
            f"Greedy outputs differ from token {result.first_difference + 1} on "
            f"(ours {result.engine_tokens}, transformers' {result.reference_tokens})."
        )


def _fail(sentence: str) -> None:
    error_console.print(f"[red]{escape(sentence)}[/red]", soft_wrap=True)
    raise typer.Exit(1)
