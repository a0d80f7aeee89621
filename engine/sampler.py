"""One decode step's next tokens for a whole batch, each row with its own parameters.

Why it is shaped this way: a step of the batched engine ends with logits [B, V] for B requests
that may each ask for something different (greedy or sampled, penalties, top-k/top-p, seeds).
Everything runs on the logits' device as [B, V] tensor operations and the chosen ids cross to
the host once, so a step costs the same few kernels at batch 1 and batch 64. When every row is
plain greedy it is one argmax. Sampled rows draw one uniform number per step from their own
generator and pick by inverse CDF, so a seeded request gives the same tokens whatever else is
in the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.penalties import apply_penalties
from engine.sampling_params import SamplingParams, SamplingRow


class Sampler:
    """Stateless: all per-request state (generator, token history) travels in the rows."""

    def sample(self, logits: torch.Tensor, rows: Sequence[SamplingRow]) -> list[int]:
        """logits: [B, V] (fp32), rows: B rows in the same order -> B token ids."""
        if logits.dim() != 2 or logits.shape[0] != len(rows):
            raise ValueError(
                f"The sampler needs logits of shape [rows, vocabulary]; got {tuple(logits.shape)} "
                f"for {len(rows)} rows."
            )
        if not rows:
            return []
        return self.sample_on_device(logits, rows).tolist()

    def sample_on_device(self, logits: torch.Tensor, rows: Sequence[SamplingRow]) -> torch.Tensor:
        """logits: [B, V] (fp32) -> token ids [B] int64 on the logits' device, without waiting
        for the device: the engine feeds them to the next step before it reads them."""
        if all(row.params.is_greedy and not row.params.has_penalties for row in rows):
            return self.greedy(logits)
        logits = apply_penalties(logits.float(), rows)  # [B, V], the input left as it was
        token_ids = torch.argmax(logits, dim=-1)  # [B]
        sampled = [i for i, row in enumerate(rows) if not row.params.is_greedy]
        if sampled:
            index = to_device(sampled, torch.long, logits.device)
            token_ids[index] = _sample_rows(logits[index], [rows[i] for i in sampled])
        return token_ids

    @staticmethod
    def greedy(logits: torch.Tensor) -> torch.Tensor:
        """logits: [B, V] -> the argmax of each row [B] int64, on the device (on CUDA over a
        large vocabulary in two reductions: argmax_rows)."""
        if logits.is_cuda and logits.shape[-1] >= TWO_STAGE_VOCAB:
            return argmax_rows(logits, 512 if logits.shape[0] <= 8 else 1024)
        return torch.argmax(logits, dim=-1)


# torch.argmax over one row of a large vocabulary reduces it in a single block: on an H100
# (bench/argmax_micro.py, bench/results/fp8_h100.md call O) 26 us for Llama 3's 128,256 logits,
# against 18 in two stages (slices of 512); 39 against 34 at 64 rows (slices of 1,024).
TWO_STAGE_VOCAB = 32_768


def argmax_rows(logits: torch.Tensor, chunk: int) -> torch.Tensor:
    """torch.argmax(logits, -1) for [B, V] logits in two reductions: the maximum of each
    `chunk`-wide slice of a row (and of the row's tail), then of those. The same index as
    torch.argmax: the first slice holding the row's maximum, the first index in it; a NaN wins
    as it does there."""
    width = logits.shape[-1]
    whole = width // chunk * chunk
    values, index = logits[:, :whole].unflatten(-1, (width // chunk, chunk)).max(dim=-1)
    index += torch.arange(0, whole, chunk, device=logits.device)
    if whole < width:  # the tail, one more slice
        tail_value, tail_index = logits[:, whole:].max(dim=-1, keepdim=True)
        values = torch.cat([values, tail_value], dim=-1)
        index = torch.cat([index, tail_index + whole], dim=-1)
    return index.gather(-1, values.argmax(dim=-1, keepdim=True)).squeeze(-1)


def to_device(values: Sequence[int] | Sequence[float], dtype: torch.dtype, device: torch.device):
    """A small host list as a tensor on `device`, copied without a wait: torch.tensor(...,
    device=cuda) copies from pageable memory and then waits for the whole stream to finish."""
    host = torch.tensor(values, dtype=dtype)
    return host if device.type == "cpu" else host.to(device, non_blocking=True)


def sample(
    logits: torch.Tensor,
    params: SamplingParams,
    generator: torch.Generator | None,
    *,
    prompt_token_ids: Sequence[int] = (),
    output_token_ids: Sequence[int] = (),
) -> int:
    """logits: [V] of one request -> a token id (the one-request form of Sampler.sample)."""
    row = SamplingRow(params, generator, prompt_token_ids, output_token_ids)
    return Sampler().sample(logits.unsqueeze(0), [row])[0]


def make_generator(params: SamplingParams, default_seed: int | None) -> torch.Generator | None:
    """A CPU generator when a seed is given (per request, else the engine's), for repeatability."""
    seed = params.seed if params.seed is not None else default_seed
    if params.is_greedy or seed is None:
        return None
    return torch.Generator().manual_seed(seed)


def _sample_rows(logits: torch.Tensor, rows: Sequence[SamplingRow]) -> torch.Tensor:
    """logits: [S, V] of rows that sample (temperature > 0) -> token ids [S] on the device."""
    device = logits.device
    temperature = to_device([row.params.temperature for row in rows], torch.float32, device)
    scaled = logits / temperature[:, None]  # [S, V]
    scaled = _top_k(scaled, [row.params.top_k for row in rows])
    probs = torch.softmax(scaled, dim=-1)  # [S, V]
    probs = _top_p(probs, [row.params.top_p for row in rows], [row.params.top_k for row in rows])
    # One uniform number per row from the row's own generator (the global one when it has
    # none): a row's draws never depend on which other rows share the step.
    uniforms = torch.cat([torch.rand(1, generator=row.generator) for row in rows])  # [S]
    cdf = torch.cumsum(probs, dim=-1)  # [S, V], unnormalised after the cuts
    total = cdf[:, -1:]  # [S, 1]
    # Strictly below the total, so the pick always lands on a token with non-zero probability.
    below_total = torch.nextafter(total, torch.zeros_like(total))
    target = torch.minimum(uniforms.to(device)[:, None] * total, below_total)  # [S, 1]
    picked = torch.searchsorted(cdf, target, right=True).squeeze(1)  # [S]
    # A row whose every token was banned has NaN probabilities; keep its id in range.
    return picked.clamp_(max=logits.shape[-1] - 1)


def _top_k(scaled: torch.Tensor, top_ks: list[int]) -> torch.Tensor:
    """Keep each row's k highest logits (ties with the k-th kept, as in transformers)."""
    vocab_size = scaled.shape[-1]
    cut = [i for i, k in enumerate(top_ks) if 0 < k < vocab_size]
    if not cut:
        return scaled
    index = to_device(cut, torch.long, scaled.device)
    ks = to_device([top_ks[i] for i in cut], torch.long, scaled.device)
    rows = scaled[index]  # [C, V]
    top = torch.topk(rows, max(top_ks[i] for i in cut), dim=-1).values  # [C, k_max]
    kth = top.gather(1, (ks - 1)[:, None])  # [C, 1]
    scaled = scaled.clone()
    scaled[index] = rows.masked_fill(rows < kth, float("-inf"))
    return scaled


def _top_p(probs: torch.Tensor, top_ps: list[float], top_ks: list[int]) -> torch.Tensor:
    """Keep the most likely tokens whose mass reaches top_p (at least one; tokens as likely as
    the last one kept stay too, so the cut depends on values only, not on how ties sort)."""
    vocab_size = probs.shape[-1]
    cut = [i for i, p in enumerate(top_ps) if p < 1.0]
    if not cut:
        return probs
    probs = probs.clone()
    # After a top-k cut only k tokens have mass: sorting k values instead of V is the saving.
    # Rows are grouped by k so that a row's result never depends on the others' k.
    by_k: dict[int, list[int]] = {}
    for i in cut:
        k = top_ks[i] if 0 < top_ks[i] < vocab_size else vocab_size
        by_k.setdefault(k, []).append(i)
    for k, group in by_k.items():
        index = to_device(group, torch.long, probs.device)
        top_p = to_device([top_ps[i] for i in group], torch.float32, probs.device)
        rows = probs[index]  # [G, V]
        if k == vocab_size:
            ranked = torch.sort(rows, dim=-1, descending=True).values  # [G, V]
        else:
            ranked = torch.topk(rows, k, dim=-1).values  # [G, k], descending
        mass_before = torch.cumsum(ranked, dim=-1) - ranked  # [G, k]
        num_kept = (mass_before < top_p[:, None]).sum(dim=-1, keepdim=True)  # [G, 1], >= 1
        threshold = ranked.gather(1, num_kept - 1)  # [G, 1]: the least likely kept
        probs[index] = rows.masked_fill(rows < threshold, 0.0)
    return probs
