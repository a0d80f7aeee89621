"""The same client load against OpenAI-compatible servers: `longdoc serve` and, for comparison,
`transformers serve --continuous-batching` on the same weights (issue 22, part 4).

Usage (from the repository root), with the servers already started:
    longdoc serve --port 8000
    transformers serve --continuous-batching --port 8001   # the same checkpoint folder
    .venv/bin/python bench/serve.py --target longdoc=http://127.0.0.1:8000 \
        --target transformers=http://127.0.0.1:8001 --label h200
    .venv/bin/python bench/serve.py --target longdoc=http://127.0.0.1:8000 --smoke   # seconds

For each target and each level of concurrency (1, 16, 64 streams by default) it keeps that many
streaming chat requests in flight until --rounds x concurrency requests have finished; each
prompt is about --prompt-tokens tokens (distinct per request, so no prefix cache helps) and asks
for --new-tokens tokens with vLLM's ignore_eos (--no-ignore-eos leaves it out, for a server that
refuses unknown fields; a server may then stop early: the tokens counted are the usage's). Measured: output tokens/s over the level (all completion tokens
/ wall time), time to first token p50/p99 (request sent to first content chunk) and inter-token
latency p99 (gaps between content chunks; a chunk holding several tokens counts once), and with
--rounds 1 the output rate while every stream decodes (bench/generate.py's figure). --warmup N
first sends N requests at once, unmeasured (a fresh server's first use of its kernels).

The levels above start every stream at once: the first requests' prefills queue behind each other
(16 prompts of 4K tokens are 64K tokens to read before the last one's first token, over 1 s of
compute on an H200), so their time to first token measures a burst, not a server under steady
use. --steady 16 adds, after them, levels where the streams start spread out (stream k waits
k x D / concurrency, D the mean time of one request alone, from the 1-stream level) and each sends
--steady-rounds requests back to back: N users at work, arrivals spread as a closed loop keeps
them. Rows say which ("arrivals": "together" or "spread"). Results:
bench/results/serve_<label>.json; the .md beside it is written by hand from it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
]


@dataclass
class One:
    ttft_s: float | None = None
    chunk_times: list[float] = field(default_factory=list)  # each content chunk's arrival
    completion_tokens: int = 0
    error: str | None = None


@dataclass
class Level:
    target: str
    concurrency: int
    requests: int
    errors: int
    wall_s: float
    output_tokens_per_s: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p99_s: float | None
    # concurrency x the median stream's decode rate (tokens after its first over the time they
    # took): the output rate while every stream decodes, without the prefills' wall time.
    decode_tokens_per_s: float | None = None
    # Output tokens/s in the window where every stream of the level has its first token and none
    # has finished (a chunk counts its request's tokens per chunk): bench/generate.py's "while
    # all decode" figure seen from the client. None when no such window (rounds > 1 staggers).
    all_decoding_tokens_per_s: float | None = None
    all_decoding_s: float | None = None
    arrivals: str = "together"  # or "spread": stream k starts at k x spacing_s (--steady)
    spacing_s: float | None = None


PROMPT_HEAD = "Repeat the following words :"


def prompt_text(index: int, num_tokens: int) -> str:
    # About one token a word for these words; the index first makes every prompt distinct.
    words = [f"{index}"] + [WORDS[(index + i) % len(WORDS)] for i in range(num_tokens - 16)]
    return f"{PROMPT_HEAD} " + " ".join(words)


async def one_request(
    client: httpx.AsyncClient, url: str, model: str, index: int, args: argparse.Namespace
) -> One:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt_text(index, args.prompt_tokens)}],
        "max_tokens": args.new_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if args.ignore_eos:
        body["ignore_eos"] = True
    result = One()
    sent = time.perf_counter()
    try:
        async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
            if response.status_code != 200:
                result.error = f"HTTP {response.status_code}"
                return result
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    result.completion_tokens = chunk["usage"]["completion_tokens"]
                choices = chunk.get("choices") or []
                if choices and (choices[0].get("delta") or {}).get("content"):
                    now = time.perf_counter()
                    if not result.chunk_times:
                        result.ttft_s = now - sent
                    result.chunk_times.append(now)
    except httpx.HTTPError as error:
        result.error = type(error).__name__
    return result


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def gaps(result: One) -> list[float]:
    """The times between a request's content chunks."""
    times = result.chunk_times
    return [later - earlier for earlier, later in itertools.pairwise(times)]


async def run_level(
    name: str,
    url: str,
    concurrency: int,
    args: argparse.Namespace,
    *,
    first_index: int = 0,
    rounds: int | None = None,
    spacing_s: float | None = None,
) -> Level:
    """concurrency streams until rounds (default --rounds) x concurrency requests are done; the
    prompts are numbered from first_index, so no two levels share one. With spacing_s, stream k
    sends its first request k x spacing_s after the level starts."""
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=args.timeout) as client:
        model = args.model or (await client.get(f"{url}/v1/models")).json()["data"][0]["id"]
        total = (rounds or args.rounds) * concurrency
        queue: asyncio.Queue[int] = asyncio.Queue()
        for index in range(first_index, first_index + total):
            queue.put_nowait(index)
        results: list[One] = []

        async def stream_slot(slot: int) -> None:
            if spacing_s:
                await asyncio.sleep(slot * spacing_s)
            while not queue.empty():
                index = queue.get_nowait()
                results.append(await one_request(client, url, model, index, args))

        started = time.perf_counter()
        await asyncio.gather(*(stream_slot(slot) for slot in range(concurrency)))
        wall = time.perf_counter() - started
    ok = [r for r in results if r.error is None]
    spans = [(r, r.chunk_times[-1] - r.chunk_times[0]) for r in ok if len(r.chunk_times) > 1]
    rates = [(r.completion_tokens - 1) / span for r, span in spans if r.completion_tokens > 1]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    all_gaps = [gap for r in ok for gap in gaps(r)]
    window = all_decoding(ok) if len(ok) == concurrency > 1 and not spacing_s else None
    return Level(
        target=name,
        concurrency=concurrency,
        requests=len(results),
        errors=len(results) - len(ok),
        wall_s=round(wall, 3),
        output_tokens_per_s=round(sum(r.completion_tokens for r in ok) / wall, 1),
        ttft_p50_s=statistics.median(ttfts) if ttfts else None,
        ttft_p99_s=percentile(ttfts, 0.99),
        itl_p99_s=percentile(all_gaps, 0.99),
        decode_tokens_per_s=round(concurrency * statistics.median(rates), 1) if rates else None,
        all_decoding_tokens_per_s=window[0] if window else None,
        all_decoding_s=window[1] if window else None,
        arrivals="spread" if spacing_s else "together",
        spacing_s=round(spacing_s, 3) if spacing_s else None,
    )


def all_decoding(results: list[One]) -> tuple[float, float] | None:
    """(tokens/s, seconds) over the window from the last first chunk to the first last chunk of
    requests that all ran at once; None when the window is empty."""
    if any(len(r.chunk_times) < 2 for r in results):
        return None
    start = max(r.chunk_times[0] for r in results)
    end = min(r.chunk_times[-1] for r in results)
    if end <= start:
        return None
    tokens = 0.0
    for r in results:
        per_chunk = max(r.completion_tokens, len(r.chunk_times)) / len(r.chunk_times)
        tokens += per_chunk * sum(1 for t in r.chunk_times if start < t <= end)
    return round(tokens / (end - start), 1), round(end - start, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", action="append", required=True, help="name=URL (repeat)")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--prompt-tokens", type=int, default=4096)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2, help="requests per stream slot")
    parser.add_argument("--model", default="", help="default: the server's first model")
    parser.add_argument("--warmup", type=int, default=0, help="requests at once before measuring")
    parser.add_argument(
        "--steady",
        default="",
        help="concurrency levels (e.g. 16) to run again with spread arrivals; needs level 1",
    )
    parser.add_argument("--steady-rounds", type=int, default=4, help="requests per stream")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--no-ignore-eos",
        dest="ignore_eos",
        action="store_false",
        help="leave out vLLM's ignore_eos (transformers serve refuses unknown fields)",
    )
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--smoke", action="store_true", help="tiny: 2 streams, short prompts")
    args = parser.parse_args()
    if args.smoke:
        args.concurrency, args.prompt_tokens, args.new_tokens, args.rounds = "1,2", 64, 8, 1
    levels = [int(c) for c in args.concurrency.split(",")]
    steady = [int(c) for c in args.steady.split(",") if c]
    if steady and 1 not in levels:
        parser.error("--steady spaces arrivals by one request's time alone: include level 1")
    rows: list[Level] = []
    for target in args.target:
        name, _, url = target.partition("=")
        url = url.rstrip("/")
        first_index = 0
        if args.warmup:  # unmeasured: the server's kernels, graphs and caches warm
            asyncio.run(run_level(name, url, args.warmup, args, first_index=10**6, rounds=1))
        # The levels started together, then the --steady ones spread by one request's time alone.
        plan = [(c, False) for c in levels] + [(c, True) for c in steady]
        for concurrency, spread in plan:
            spacing = None
            if spread:
                alone = next(r for r in rows if r.target == name and r.concurrency == 1)
                spacing = alone.wall_s / alone.requests / concurrency
            row = asyncio.run(
                run_level(
                    name,
                    url,
                    concurrency,
                    args,
                    first_index=first_index,
                    rounds=args.steady_rounds if spread else None,
                    spacing_s=spacing,
                )
            )
            first_index += row.requests
            rows.append(row)
            print(json.dumps(asdict(row)), flush=True)
    if args.label:
        out = args.out_dir / f"serve_{args.label}.json"
        settings = {k: str(v) for k, v in vars(args).items() if k not in ("api_key", "out_dir")}
        out.write_text(
            json.dumps({"args": settings, "levels": [asdict(r) for r in rows]}, indent=2)
        )
        print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
