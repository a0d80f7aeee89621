"""Next-token choice from one position's logits: greedy, or temperature with top-p."""

from __future__ import annotations

import torch

from engine.sampling_params import SamplingParams


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
    """logits: [V] fp32 -> a token id."""
    if params.is_greedy:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / params.temperature, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, sorted_ids = torch.sort(probs, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (the first token always stays).
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(mass_before >= params.top_p, 0.0)
        choice = torch.multinomial(sorted_probs.cpu(), 1, generator=generator)
        return int(sorted_ids[int(choice)])
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))


def make_generator(params: SamplingParams, default_seed: int | None) -> torch.Generator | None:
    """A CPU generator when a seed is given (per request, else the engine's), for repeatability."""
    seed = params.seed if params.seed is not None else default_seed
    if params.is_greedy or seed is None:
        return None
    return torch.Generator().manual_seed(seed)
