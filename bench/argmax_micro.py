"""The greedy step's argmax over a large vocabulary: torch.argmax against a two-stage argmax
(engine/sampler.py's argmax_rows, what Sampler.greedy takes on CUDA since this measured it).

A decode step's profile on the H200 (bench/results/decode_profile_h200.kernels.txt) shows
torch.argmax over one row of Llama 3's 128,256 logits taking 27 us (one reduce kernel), against
about 3 us to read the row's 0.5 MB: it appears to reduce the row in a single block. The two-stage
form reduces CHUNK-wide slices of each row in parallel (torch.max over [B, V // CHUNK, CHUNK]),
then the slices' maxima, and returns the same index as torch.argmax (the first of equal maxima:
the first slice holding the maximum, then the first index in it; a NaN wins as it does there).

Usage: python3 bench/argmax_micro.py --out FILE.json
Times each form per call from a CUDA graph of 32 calls (bench._timing.graph_call_us), on fp32
and bf16 logits at 1, 8 and 64 rows, after checking both give the same indices (ties included).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench._report import hardware  # noqa: E402
from bench._timing import graph_call_us  # noqa: E402
from engine.sampler import argmax_rows as two_stage_argmax  # noqa: E402

VOCAB = 128_256  # Llama 3
CALLS = 32


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chunks", type=int, nargs="+", default=[512, 1024, 2048])
    args = parser.parse_args()
    device = torch.device("cuda")
    result = {"hardware": hardware(device), "args": vars(args) | {"out": str(args.out)}}
    result["rows"] = []
    for dtype, batch in itertools.product([torch.float32, torch.bfloat16], [1, 8, 64]):
        logits = [torch.randn(batch, VOCAB, device=device).to(dtype) for _ in range(CALLS)]
        logits[0][:, 7] = logits[0][:, 70_000] = 100.0  # a tie: the first index wins
        row = {"dtype": str(dtype), "batch": batch}
        row["argmax_us"] = graph_call_us([lambda x=x: torch.argmax(x, dim=-1) for x in logits])
        for chunk in args.chunks:
            for x in logits[:4]:
                assert torch.equal(two_stage_argmax(x, chunk), torch.argmax(x, dim=-1))
            calls = [lambda x=x, c=chunk: two_stage_argmax(x, c) for x in logits]
            row[f"two_stage_{chunk}_us"] = graph_call_us(calls)
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps(result, indent=2))
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
