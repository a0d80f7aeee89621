"""transformers' prefill, the two ways BASELINES.md measures it.

- chunked: the loop `model(input_ids=chunk, <cache>=DynamicCache, use_cache=True,
  logits_to_keep=1)`; transformers 5.24 renamed the `past_key_values` argument to `cache`
  (the old name still works there, with a deprecation warning), 5.17 knows only
  `past_key_values`, so the name is read off the forward signature.
- unchunked: one forward over the whole prompt with `use_cache=False` and `logits_to_keep=1`
  (no cache is kept: transformers' best case for a pure prefill).
"""

from __future__ import annotations

import inspect
from functools import cache

import torch


@cache
def _cache_kwarg(model_class: type) -> str:
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _new_dynamic_cache(model: torch.nn.Module):
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older signatures take no config
        return DynamicCache()


@torch.inference_mode()
def prefill_chunked(model: torch.nn.Module, input_ids: torch.Tensor, chunk: int) -> torch.Tensor:
    """fp32 logits of the last position [V]; input_ids: [1, S] on the model's device."""
    kv_cache = _new_dynamic_cache(model)
    kwarg = _cache_kwarg(type(model))
    num_tokens = input_ids.shape[1]
    logits = None
    for start in range(0, num_tokens, chunk):
        out = model(
            input_ids=input_ids[:, start : start + chunk],
            use_cache=True,
            logits_to_keep=1,
            **{kwarg: kv_cache},
        )
        logits = out.logits
        del out
    assert logits is not None
    return logits[0, -1].float()


@torch.inference_mode()
def prefill_unchunked(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """fp32 logits of the last position [V]; input_ids: [1, S]."""
    out = model(input_ids=input_ids, use_cache=False, logits_to_keep=1)
    return out.logits[0, -1].float()
