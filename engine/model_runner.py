"""The only place that runs the model: one step over the chunks of many sequences, from the
scheduled step to its sampled ids on the device.

launch() is the step's run in nano-vllm's sense: prepare_inputs() turns the scheduled chunks into
the model's inputs (the previous step's samples fed from the device where the host holds
placeholders), run() launches the forward, sample() picks the next ids on the device, and their
copy to the host starts; nothing is waited for, so the step pipeline (engine/step_pipeline.py)
can schedule the next step while this one computes.

A step's tokens are flattened ([T] ids and positions, decodes first); the matrix products run
over all of them at once. Attention, the one part that is per sequence, is split: the step's
single-token chunks (the decodes) go through one paged decode kernel over all their block tables
where one is available (CUDA with Triton), and every longer chunk (a prefill chunk) goes through
the backend's own prefill path, one call per chunk, exactly as when it ran alone. Decode-only
steps on CUDA replay a captured CUDA graph (engine/cuda_graphs.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import torch

from engine.attention import AttentionBackend, AttentionMetadata
from engine.attention.decode import DecodeAttention, DecodeBatch, make_decode_attention
from engine.cuda_graphs import DecodeGraphs
from engine.kv_cache import KVCache
from engine.models import LlamaModel
from engine.request import Request, monotonic
from engine.sampler import Sampler, to_device
from engine.sampling_params import SamplingRow
from engine.scheduler import Step
from engine.sequence import PLACEHOLDER_TOKEN_ID
from engine.step_inputs import (
    LOGITS_ALL,
    LOGITS_LAST,
    LOGITS_NONE,
    ChunkInput,
    FedTokens,
    LaunchedStep,
)

logger = logging.getLogger(__name__)


class ModelRunner:
    def __init__(
        self,
        model: LlamaModel,
        kv_cache: KVCache,
        backend: AttentionBackend,
        device: torch.device,
        *,
        use_cuda_graphs: bool = False,
        max_num_seqs: int = 64,
        max_model_len: int = 8192,
    ) -> None:
        self.model = model
        self.kv_cache = kv_cache
        self.backend = backend
        self.device = device
        self.block_size = kv_cache.block_size
        self.decode_attention: DecodeAttention = make_decode_attention(backend, device)
        # The decode kernels' variants compiled now, not inside the first step that needs one
        # (a failure here is left to that step, as before).
        try:
            self.decode_attention.prebuild(
                model.args.num_heads, kv_cache, model.embed_tokens.weight.dtype
            )
        except Exception as exc:  # a compiler's error: the step that needs the kernel reports it
            logger.warning("Decode kernels not built ahead (%s): %.300s", type(exc).__name__, exc)
        self.graphs = None
        if use_cuda_graphs and device.type == "cuda" and self.decode_attention.is_graph_safe:
            self.graphs = DecodeGraphs(self, max_num_seqs=max_num_seqs, max_model_len=max_model_len)
        self._sampler = Sampler()

    # ---- one step -------------------------------------------------------------------------

    def launch(
        self, step: Step, requests: Mapping[int, Request], previous: LaunchedStep | None
    ) -> LaunchedStep:
        """Prepare the step's inputs, launch its forward, sample its next ids on the device and
        start their copy to the host, waiting for none of it. requests: every request by id
        (read, not changed, except a prefill-only request's logits). previous: the step
        launched before this one, whose samples are not read yet."""
        started = monotonic()
        inputs, fed = self.prepare_inputs(step, requests, previous)
        logits = self.run(inputs, fed)  # launched, not waited for
        sampled, row_of = self.sample(step, requests, logits)
        sampled_host, done = sampled, None
        if self.device.type == "cuda":
            if sampled is not None:
                sampled_host = sampled.to("cpu", non_blocking=True)  # into pinned memory
            # Waited for even without samples: a prefill chunk's time is its device time.
            done = torch.cuda.Event()
            done.record()
        return LaunchedStep(step, started, sampled, sampled_host, done, row_of)

    def prepare_inputs(
        self, step: Step, requests: Mapping[int, Request], previous: LaunchedStep | None
    ) -> tuple[list[ChunkInput], FedTokens | None]:
        """Each chunk's tokens, positions, block table and the logits it needs. A decode whose
        token is a placeholder (sampled by `previous`, not read yet) takes it from the device."""
        inputs = []
        fed_rows: list[int] = []
        source_rows: list[int] = []
        offset = 0
        for chunk in step.chunks:
            request = requests[chunk.seq.request_id]
            if request.prefill_only and request.all_logits:
                mode = LOGITS_ALL
            else:
                mode = LOGITS_LAST if chunk.is_last else LOGITS_NONE
            tokens = chunk.seq.token_ids[chunk.start : chunk.end]
            if tokens[0] == PLACEHOLDER_TOKEN_ID:
                # The previous step's sample, still on the device (only a decode's one token).
                assert previous is not None and chunk.num_tokens == 1
                fed_rows.append(offset)
                source_rows.append(previous.row_of[request.request_id])
                tokens = [0]
            inputs.append(ChunkInput(tokens, chunk.start, chunk.seq.block_table, mode))
            offset += chunk.num_tokens
        if not fed_rows:
            return inputs, None
        assert previous is not None and previous.sampled is not None
        return inputs, FedTokens(fed_rows, previous.sampled, source_rows)

    def sample(
        self, step: Step, requests: Mapping[int, Request], logits: torch.Tensor
    ) -> tuple[torch.Tensor | None, dict[int, int]]:
        """Tokens [R] on the device for the chunks that sample, and each request's row. A
        prefill-only request samples nothing: its rows of the logits are kept on the request."""
        rows: list[int] = []
        sampling: list[Request] = []
        row = 0
        for chunk in step.chunks:
            request = requests[chunk.seq.request_id]
            if request.prefill_only:
                num_rows = chunk.num_tokens if request.all_logits else int(chunk.is_last)
                request.logits.append(logits[row : row + num_rows].clone())
                row += num_rows
            elif chunk.is_last:
                rows.append(row)
                sampling.append(request)
                row += 1
        if not rows:
            return None, {}
        if rows[-1] == len(rows) - 1:  # rows 0..R-1: the logits as they are, no gather
            picked = logits[: len(rows)]
        else:
            picked = logits.index_select(0, to_device(rows, torch.long, logits.device))
        if all(r.is_plain_greedy for r in sampling):
            sampled = self._sampler.greedy(picked)
        else:
            sampled = self._sampler.sample_on_device(picked, [_sampling_row(r) for r in sampling])
        return sampled, {r.request_id: i for i, r in enumerate(sampling)}

    # ---- the forward ----------------------------------------------------------------------

    @torch.inference_mode()
    def run(self, chunks: list[ChunkInput], fed: FedTokens | None = None) -> torch.Tensor:
        """Write the KV of every chunk and return fp32 logits [N, V]: for each chunk in order,
        none, its last position or all its positions, as it asks. fed: input ids to take from
        the device instead of the chunks' token_ids. Launches the work without waiting for it."""
        num_decodes = _num_leading_single_tokens(chunks)
        if self.graphs is not None and num_decodes == len(chunks):
            logits = self.graphs.run(chunks, fed)
            if logits is not None:
                return logits
        return self.forward_eager(chunks, num_decodes, fed)

    def forward_eager(
        self, chunks: list[ChunkInput], num_decodes: int, fed: FedTokens | None = None
    ) -> torch.Tensor:
        device = self.device
        input_ids = to_device(
            [t for chunk in chunks for t in chunk.token_ids], torch.long, device
        )  # [T]
        if fed is not None:
            fed.write_into(input_ids)
        positions = to_device(
            [p for chunk in chunks for p in range(chunk.start, chunk.start + chunk.num_tokens)],
            torch.long,
            device,
        )  # [T]
        decode = self._decode_batch(chunks[:num_decodes]) if num_decodes else None
        prefills = [
            (offset, self._prefill_metadata(chunk))
            for offset, chunk in _offsets(chunks, num_decodes)
        ]
        cache, backend, decode_attention = self.kv_cache, self.backend, self.decode_attention

        def attention(layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
            # q: [T, H, D], k, v: [T, KV, D]
            k_cache, v_cache = cache.k[layer_idx], cache.v[layer_idx]
            if decode is None and len(prefills) == 1:
                return backend.forward(q, k, v, k_cache, v_cache, prefills[0][1])
            out = torch.empty_like(q)
            if decode is not None:
                n = num_decodes
                out[:n] = decode_attention.forward(q[:n], k[:n], v[:n], k_cache, v_cache, decode)
            for offset, meta in prefills:
                rows = slice(offset, offset + meta.num_query_tokens)
                out[rows] = backend.forward(q[rows], k[rows], v[rows], k_cache, v_cache, meta)
            return out

        logits_indices = _logits_indices(chunks, device)
        if logits_indices is not None and logits_indices.numel() == 0:
            self.model(input_ids, positions, attention, logits_indices)
            return torch.empty(0, self.model.args.vocab_size, device=device)
        return self.model(input_ids, positions, attention, logits_indices).float()

    # ---- metadata -------------------------------------------------------------------------

    def _prefill_metadata(self, chunk: ChunkInput) -> AttentionMetadata:
        device = self.device
        num_blocks = -(-(chunk.start + chunk.num_tokens) // self.block_size)
        table = chunk.block_table[:num_blocks]
        table_t = to_device(table, torch.int32, device)
        positions = torch.arange(chunk.start, chunk.start + chunk.num_tokens, device=device)
        slots = table_t[positions // self.block_size].long() * self.block_size
        slots += positions % self.block_size
        return self.backend.prepare(
            AttentionMetadata(
                start=chunk.start,
                num_query_tokens=chunk.num_tokens,
                slot_mapping=slots,
                block_table=table_t,
                block_size=self.block_size,
                first_block_if_contiguous=_first_if_consecutive(table),
            )
        )

    def _decode_batch(self, chunks: list[ChunkInput]) -> DecodeBatch:
        return DecodeBatch.build(
            [chunk.start for chunk in chunks],
            [chunk.block_table for chunk in chunks],
            self.block_size,
            self.device,
            per_row=None if self.decode_attention.is_batched else self._prefill_metadata,
            chunks=chunks,
        )


def _num_leading_single_tokens(chunks: list[ChunkInput]) -> int:
    count = 0
    for chunk in chunks:
        if chunk.num_tokens != 1:
            break
        count += 1
    return count


def _offsets(chunks: list[ChunkInput], first: int) -> list[tuple[int, ChunkInput]]:
    offset = sum(chunk.num_tokens for chunk in chunks[:first])
    found = []
    for chunk in chunks[first:]:
        found.append((offset, chunk))
        offset += chunk.num_tokens
    return found


def _logits_indices(chunks: list[ChunkInput], device: torch.device) -> torch.Tensor | None:
    """Rows of the flat step whose logits are needed; None for all of them."""
    if all(chunk.logits == LOGITS_ALL for chunk in chunks):
        return None
    if all(chunk.logits == LOGITS_LAST and len(chunk.token_ids) == 1 for chunk in chunks):
        return None  # a decode step: every row samples
    rows: list[int] = []
    offset = 0
    for chunk in chunks:
        if chunk.logits == LOGITS_ALL:
            rows.extend(range(offset, offset + chunk.num_tokens))
        elif chunk.logits == LOGITS_LAST:
            rows.append(offset + chunk.num_tokens - 1)
        offset += chunk.num_tokens
    return to_device(rows, torch.long, device)


def _first_if_consecutive(table: list[int]) -> int | None:
    if not table:
        return None
    first = table[0]
    return (
        first
        if table[-1] - first == len(table) - 1 and table == list(range(first, first + len(table)))
        else None
    )


def _sampling_row(request: Request) -> SamplingRow:
    params, seq = request.params, request.seq
    return SamplingRow(
        params,
        request.generator,
        seq.prompt_token_ids if params.penalty_scope == "all" else (),
        seq.completion_token_ids if params.has_penalties else (),
    )
