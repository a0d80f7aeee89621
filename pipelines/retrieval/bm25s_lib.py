"""bm25s, imported so that it cannot take the GPU.

When JAX is installed (it is on many GPU machines), importing bm25s imports JAX and runs one
top-k through it, which starts JAX on the GPU and reserves 75% of the card's memory for it: 59 GB
of an 80 GB H100, before our engine has loaded a weight (seen with `longdoc serve`, whose KV cache
then did not fit). BM25 is CPU work here, so JAX is pointed at the CPU before bm25s is first
imported, unless the person running us has chosen JAX's platforms themselves. Import bm25s from
this module only.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import bm25s
from bm25s.stopwords import STOPWORDS_EN

__all__ = ["STOPWORDS_EN", "bm25s"]
