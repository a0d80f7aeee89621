"""Write the checkpoint that bench/serve.py's servers load: a random-weight model of a preset's
shape (default Llama-3-8B, bf16) with a word-level tokenizer that has one token for each of
serve.py's prompt words and numbers, and a chat template.

Usage: python3 bench/serve_checkpoint.py /tmp/llama3-8b-chat [--preset llama3-8b-random]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench._models import random_hf_model, write_chat_checkpoint  # noqa: E402
from bench.serve import PROMPT_HEAD, WORDS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--preset", default="llama3-8b-random")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    model = random_hf_model(args.preset, device=torch.device(args.device), dtype=dtype)
    words = (*PROMPT_HEAD.split(), *WORDS, *(str(i) for i in range(1024)), "user", "assistant")
    write_chat_checkpoint(model, args.folder, words)
    print("wrote", args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
