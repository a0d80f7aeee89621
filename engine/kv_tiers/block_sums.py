"""The "sum64x2" checksum of KV blocks (block_file.py), computed where the blocks are: on the GPU
as they are copied down, and after a load copied them up, so the host never reads a payload a
second time to hash it.

Per block: the sum of its 64-bit words, and the sum of word i times 2i + 1, both mod 2**64 (as
signed integers). Integer sums wrap alike in torch (CPU and CUDA) and numpy, in any order, so
the values match block_file.payload_sums on the host. Any change of one word changes the plain
sum; a word moved changes the weighted one. An integrity check against a disk's faults and
torn writes, not against someone who can write the folder (its permissions keep them out).
"""

from __future__ import annotations

import torch

_weights: dict[tuple[torch.device, int], torch.Tensor] = {}


def block_sums(blocks: torch.Tensor) -> torch.Tensor:
    """[n, 2] int64 on blocks' device: "sum64x2" of each of blocks[0], ..., blocks[n - 1]
    (each contiguous, a multiple of 8 bytes)."""
    num_blocks = blocks.shape[0]
    words = blocks.reshape(num_blocks, -1).view(torch.int64)
    key = (words.device, words.shape[1])
    weights = _weights.get(key)
    if weights is None:
        weights = torch.arange(1, 2 * words.shape[1], 2, dtype=torch.int64, device=words.device)
        if weights.is_cuda:  # made on one stream, read on others later: finished first
            torch.cuda.current_stream(weights.device).synchronize()
        _weights[key] = weights
    return torch.stack((words.sum(1), (words * weights).sum(1)), dim=1)


def to_device(values: list, device: torch.device, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """A small host list as a tensor on device (queued on the current stream)."""
    return torch.tensor(values, dtype=dtype).to(device, non_blocking=True)
