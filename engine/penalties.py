"""Repetition controls on a batch of logits: the penalties and the no-repeat n-gram ban.

Why a file of its own: these rules read each request's token history, which the rest of the
sampler never needs, and they must match their references exactly (transformers'
RepetitionPenaltyLogitsProcessor and NoRepeatNGramLogitsProcessor, OpenAI's frequency and
presence penalties) so that settings tuned elsewhere mean the same here. Histories are padded
into one [R, L] tensor with a spare id (the vocabulary size) whose column is dropped, so each
rule is a few tensor operations over the whole batch, with no Python loop over tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.sampling_params import SamplingRow


def apply_penalties(logits: torch.Tensor, rows: Sequence[SamplingRow]) -> torch.Tensor:
    """logits: [B, V] -> [B, V] with every row's repetition controls applied (a new tensor
    where any row has some; the same tensor otherwise)."""
    penalised = [i for i, row in enumerate(rows) if row.params.has_penalties]
    if not penalised:
        return logits
    vocab_size = logits.shape[-1]
    device = logits.device
    chosen = [rows[i] for i in penalised]
    histories = _pad_left([_history(row, device) for row in chosen], vocab_size, device)
    index = torch.tensor(penalised, device=device)
    # Only the history's tokens change, so the rules gather and scatter [R, L] values instead
    # of sweeping [R, V]; the spare column V takes the padding's writes.
    spare = torch.nn.functional.pad(logits[index], (0, 1))  # [R, V + 1]
    if any(_counts_tokens(row) for row in chosen):
        _count_penalties(spare, histories, chosen)
    _ban_repeated_ngrams(spare, histories, [row.params.no_repeat_ngram_size for row in chosen])
    if len(penalised) == len(rows):
        return spare[:, :vocab_size]
    out = logits.clone()
    out[index] = spare[:, :vocab_size]
    return out


def _history(row: SamplingRow, device: torch.device) -> torch.Tensor:
    """The token ids a row's rules count: [L] int64 on the device."""
    output = torch.as_tensor(list(row.output_token_ids), dtype=torch.long)
    if row.params.penalty_scope == "all" and len(row.prompt_token_ids) > 0:
        prompt = torch.as_tensor(row.prompt_token_ids, dtype=torch.long).to(device)
        return torch.cat([prompt, output.to(device)])
    return output.to(device)


def _counts_tokens(row: SamplingRow) -> bool:
    params = row.params
    return (
        params.repetition_penalty != 1.0
        or params.frequency_penalty != 0.0
        or params.presence_penalty != 0.0
    )


def _count_penalties(
    spare: torch.Tensor, histories: torch.Tensor, rows: Sequence[SamplingRow]
) -> None:
    """spare: [R, V + 1] logits, changed in place; histories: [R, L] padded with V.
    Repetition first, then frequency and presence (vLLM's order)."""
    device = spare.device
    repetition = torch.tensor([row.params.repetition_penalty for row in rows], device=device)
    frequency = torch.tensor([row.params.frequency_penalty for row in rows], device=device)
    presence = torch.tensor([row.params.presence_penalty for row in rows], device=device)
    counts = torch.zeros_like(spare)  # [R, V + 1]
    counts.scatter_add_(1, histories, torch.ones_like(histories, dtype=counts.dtype))
    seen = spare.gather(1, histories)  # [R, L]: each position's logit, repeats alike
    count = counts.gather(1, histories)  # [R, L]
    # transformers' arithmetic exactly: a rate of 1.0 leaves the logit unchanged.
    seen = torch.where(seen < 0, seen * repetition[:, None], seen / repetition[:, None])
    seen = seen - frequency[:, None] * count - presence[:, None]
    # Repeated ids write the same value, so the scatter's order does not matter.
    spare.scatter_(1, histories, seen)


def _ban_repeated_ngrams(spare: torch.Tensor, histories: torch.Tensor, sizes: list[int]) -> None:
    """spare: [R, V + 1] logits, changed in place; histories: [R, L] padded on the left with V.
    A row with size n > 0 loses every token that would end an n-gram already in its history
    (rows grouped by n, one pass per distinct n)."""
    pad_id = spare.shape[-1] - 1
    num_tokens = (histories != pad_id).sum(dim=1)  # [R]
    for n in sorted({size for size in sizes if size > 0}):
        if histories.shape[1] < n:
            continue  # no complete n-gram in any row yet
        group = torch.tensor([i for i, size in enumerate(sizes) if size == n], device=spare.device)
        padded = histories[group]  # [G, L]
        windows = padded.unfold(1, n, 1)  # [G, L - n + 1, n]
        suffix = padded[:, padded.shape[1] - n + 1 :]  # [G, n - 1]: what the next token extends
        # Every window is an n-gram of the history; the one that would start at the suffix
        # needs the token being chosen, so it is not among them.
        matches = (windows[..., :-1] == suffix[:, None, :]).all(dim=-1)  # [G, L - n + 1]
        matches &= (num_tokens[group] >= n)[:, None]  # a short row's suffix holds padding
        # Non-matching windows write into the spare column, where they cannot ban anything.
        banned = torch.where(matches, windows[..., -1], pad_id)  # [G, L - n + 1]
        rows = spare[group]
        rows.scatter_(1, banned, float("-inf"))
        spare[group] = rows


def _pad_left(histories: list[torch.Tensor], pad_id: int, device: torch.device) -> torch.Tensor:
    """[R, L] int64, each history right-aligned so that all of them end at the last column."""
    if all(len(h) == 0 for h in histories):
        return torch.full((len(histories), 1), pad_id, dtype=torch.long, device=device)
    return torch.nn.utils.rnn.pad_sequence(
        histories, batch_first=True, padding_value=pad_id, padding_side="left"
    )
