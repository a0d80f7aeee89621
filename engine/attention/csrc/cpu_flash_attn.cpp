// Causal flash-attention forward, fp32, for x86 CPUs with AVX-512 (F, BW, VL, DQ) and FMA.
//
// Why not SDPA: PyTorch's CPU flash kernel spends its time in MKL sgemm, and MKL takes its
// generic (non-AVX-512) path on AMD CPUs. This kernel does the same math with AVX-512
// intrinsics and no BLAS. engine/attention/cpu_flash.py builds it, and only on CPUs that
// have the instructions this file is compiled for.
//
// Layout ("queries across the lanes"). A row block is up to 48 (token, head) rows: a few
// query tokens times the query heads that share one KV head (GQA), ordered token by token
// and held as 1-3 vectors of 16 rows. Everything per block is kept transposed so a row is
// a lane:
//   Q^T [D][48]  (scaled by log2(e) / sqrt(D), so the softmax runs in base 2)
//   S^T [64][48] (scores against one tile of 64 keys; becomes P^T in place)
//   O^T [D][48]  (unnormalized output accumulator)
// S^T = K Q^T broadcasts one key element against a vector of 16 query rows, so K and V are
// read in their natural [token, head, d] layout through a token stride (no packing, no
// copy of a paged cache's view), every K/V element loaded serves all heads of the group,
// and the per-row softmax (max, sum, rescale) is plain lane-wise math with no horizontal
// reductions. A work item runs up to 4 consecutive row blocks of one KV head against each
// key tile in turn, so a tile is fetched from the shared cache once for all of them
// (measured 1.24x at head dim 128, 8 KV heads, a 4 KiB token stride; neutral at 64).
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/extension.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

constexpr int kLanes = 16;
constexpr int kMaxRowVecs = 3;
constexpr int kMaxRows = kLanes * kMaxRowVecs;  // row stride of the transposed buffers
constexpr int kKeyTile = 64;                    // keys per online-softmax step
constexpr int kKeyBlock = 8;                    // keys per score micro-kernel call
constexpr int kMaxBlocks = 4;                   // row blocks per work item
constexpr int kMaxHeadDim = 256;

// 2^x with ~1e-7 relative error; 0 for x < -126 (including -inf), NaN stays NaN.
// Range reduction x = n + f, n = round(x), f in [-0.5, 0.5]; 2^f by a degree-6 minimax
// polynomial; scalef multiplies by 2^n without building the exponent bits by hand.
// Inputs are <= 0 here (scores minus their running max), so no overflow handling.
inline __m512 exp2_ps(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-126.0f);
  // Dropping results below 2^-126 costs nothing: every row sum holds a term equal to 1.
  const __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);
  x = _mm512_max_ps(lo, x);  // operand order keeps a NaN x
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.53533620e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.33988750e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.61843692e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.55033237e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.40226477e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.93147182e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(keep, p, n);
}

// S^T rows for kKeyBlock keys starting at `key`: st[n][r] = sum_d key[n][d] * qt[d][r].
// Keys from `num_keys` on (a tile's tail) reread the last real key, so nothing past the
// tensor is read; their duplicate scores cannot change the max, and the softmax and P V
// stop at num_keys.
// kMask: set scores of keys past a row's position to -inf (only blocks on the diagonal).
template <int MV, bool kMask>
inline void score_block(const float* qt, int head_dim, const float* key, int64_t key_stride,
                        int num_keys, int key_pos, const int32_t* row_pos, float* st,
                        __m512* tile_max) {
  const float* kp[kKeyBlock];
#pragma GCC unroll 8
  for (int n = 0; n < kKeyBlock; ++n) kp[n] = key + std::min(n, num_keys - 1) * key_stride;

  __m512 acc[kKeyBlock][MV];
#pragma GCC unroll 8
  for (int n = 0; n < kKeyBlock; ++n)
#pragma GCC unroll 3
    for (int v = 0; v < MV; ++v) acc[n][v] = _mm512_setzero_ps();

  for (int d = 0; d < head_dim; ++d) {
    __m512 qv[MV];
#pragma GCC unroll 3
    for (int v = 0; v < MV; ++v) qv[v] = _mm512_load_ps(qt + d * kMaxRows + v * kLanes);
#pragma GCC unroll 8
    for (int n = 0; n < kKeyBlock; ++n) {
      const __m512 kb = _mm512_set1_ps(kp[n][d]);
#pragma GCC unroll 3
      for (int v = 0; v < MV; ++v) acc[n][v] = _mm512_fmadd_ps(kb, qv[v], acc[n][v]);
    }
  }

  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
#pragma GCC unroll 8
  for (int n = 0; n < kKeyBlock; ++n) {
#pragma GCC unroll 3
    for (int v = 0; v < MV; ++v) {
      if constexpr (kMask) {
        const __m512i pos = _mm512_load_si512(row_pos + v * kLanes);
        const __mmask16 future = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(key_pos + n), pos);
        acc[n][v] = _mm512_mask_mov_ps(acc[n][v], future, neg_inf);
      }
      _mm512_store_ps(st + n * kMaxRows + v * kLanes, acc[n][v]);
      tile_max[v] = _mm512_max_ps(tile_max[v], acc[n][v]);
    }
  }
}

// One online-softmax step over a tile's scores: new running max, the factor alpha that
// rescales what was accumulated under the old max, and P^T = 2^(S^T - max) in place.
template <int MV>
inline void softmax_step(float* st, int num_keys, const __m512* tile_max, __m512* row_max,
                         __m512* row_sum, __m512* alpha) {
#pragma GCC unroll 3
  for (int v = 0; v < MV; ++v) {
    // Key 0 is in every row's first tile, so the max is finite from the first tile on and
    // alpha = 2^(-inf) = 0 there; later fully masked rows keep their max (alpha = 1).
    const __m512 m = _mm512_max_ps(row_max[v], tile_max[v]);
    alpha[v] = exp2_ps(_mm512_sub_ps(row_max[v], m));
    row_max[v] = m;
    row_sum[v] = _mm512_mul_ps(row_sum[v], alpha[v]);
  }
  for (int n = 0; n < num_keys; ++n) {
#pragma GCC unroll 3
    for (int v = 0; v < MV; ++v) {
      float* s = st + n * kMaxRows + v * kLanes;
      const __m512 p = exp2_ps(_mm512_sub_ps(_mm512_load_ps(s), row_max[v]));
      _mm512_store_ps(s, p);
      row_sum[v] = _mm512_add_ps(row_sum[v], p);
    }
  }
}

// O^T rows d0..d0+DB: ot[d][r] = alpha[r] * ot[d][r] + sum_n val[n][d] * pt[n][r].
template <int MV, int DB>
inline void pv_block(float* ot, const float* pt, const float* val, int64_t val_stride,
                     int num_keys, const __m512* alpha) {
  __m512 acc[DB][MV];
#pragma GCC unroll 16
  for (int dd = 0; dd < DB; ++dd)
#pragma GCC unroll 3
    for (int v = 0; v < MV; ++v)
      acc[dd][v] = _mm512_mul_ps(_mm512_load_ps(ot + dd * kMaxRows + v * kLanes), alpha[v]);

  for (int n = 0; n < num_keys; ++n) {
    __m512 pv[MV];
#pragma GCC unroll 3
    for (int v = 0; v < MV; ++v) pv[v] = _mm512_load_ps(pt + n * kMaxRows + v * kLanes);
    const float* vr = val + n * val_stride;
#pragma GCC unroll 16
    for (int dd = 0; dd < DB; ++dd) {
      const __m512 b = _mm512_set1_ps(vr[dd]);
#pragma GCC unroll 3
      for (int v = 0; v < MV; ++v) acc[dd][v] = _mm512_fmadd_ps(b, pv[v], acc[dd][v]);
    }
  }

#pragma GCC unroll 16
  for (int dd = 0; dd < DB; ++dd)
#pragma GCC unroll 3
    for (int v = 0; v < MV; ++v) _mm512_store_ps(ot + dd * kMaxRows + v * kLanes, acc[dd][v]);
}

struct Problem {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  int64_t q_tok, q_head;  // element strides; the last dim is contiguous everywhere
  int64_t k_tok, k_head;
  int64_t v_tok, v_head;
  int64_t o_tok, o_head;
  int64_t start;
  int head_dim;
  int group;  // query heads per KV head
};

// A KV head, `num_heads` of its query heads from `head0` on, and `num_tokens` query tokens
// from `tok0` on, split into row blocks of `tokens_per_block` tokens.
struct Item {
  int64_t tok0;
  int kv_head;
  int head0;
  int num_tokens;
  int num_heads;
};

// Rows r = t * num_heads + j: query token tok0 + t, head j of the item's heads.
struct Block {
  int64_t tok0;
  int num_tokens;
  int row_vecs;  // ceil(rows / 16)
  float* qt;         // [head_dim][kMaxRows]
  float* ot;         // [head_dim][kMaxRows]
  int32_t* row_pos;  // [kMaxRows]
  float* row_max;    // [kMaxRows]
  float* row_sum;    // [kMaxRows]
};

// Calls f with the block's row-vector count as a compile-time constant.
template <typename F>
inline void with_row_vecs(int row_vecs, F&& f) {
  switch (row_vecs) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    default: f(std::integral_constant<int, 3>{}); break;
  }
}

// Q^T, positions, and an empty accumulator and softmax state.
void prepare_block(const Problem& pb, const Item& it, const Block& b) {
  const int D = pb.head_dim;
  const int rows = b.num_tokens * it.num_heads;
  // Fold the softmax scale and the change to base 2 into Q once.
  const float scale = static_cast<float>(M_LOG2E / std::sqrt(static_cast<double>(D)));
  // Padding rows get zero queries and the last row's position: finite scores, never stored.
  std::fill(b.qt, b.qt + D * kMaxRows, 0.0f);
  for (int r = 0; r < b.row_vecs * kLanes; ++r) {
    const int t = r < rows ? r / it.num_heads : b.num_tokens - 1;
    b.row_pos[r] = static_cast<int32_t>(pb.start + b.tok0 + t);
    b.row_max[r] = -std::numeric_limits<float>::infinity();
    b.row_sum[r] = 0.0f;
    if (r >= rows) continue;
    const int head = it.kv_head * pb.group + it.head0 + r % it.num_heads;
    const float* src = pb.q + (b.tok0 + t) * pb.q_tok + head * pb.q_head;
    for (int d = 0; d < D; ++d) b.qt[d * kMaxRows + r] = src[d] * scale;
  }
  std::fill(b.ot, b.ot + D * kMaxRows, 0.0f);
}

// One key tile for one block: scores, online softmax, O += P V.
template <int MV>
void tile_block(const Problem& pb, const Block& b, const float* k_head, const float* v_head,
                int64_t k0, float* st) {
  // O^T rows per P V call: DB x MV accumulators, 24 for 2-3 row vectors, 16 for one.
  constexpr int DB = MV == 1 ? 16 : 8;
  const int D = pb.head_dim;
  const int64_t pos_min = pb.start + b.tok0;
  const int64_t pos_max = pos_min + b.num_tokens - 1;
  const int num_keys = static_cast<int>(std::min<int64_t>(kKeyTile, pos_max + 1 - k0));
  __m512 row_max[MV], row_sum[MV], alpha[MV], tile_max[MV];
  for (int v = 0; v < MV; ++v) {
    row_max[v] = _mm512_load_ps(b.row_max + v * kLanes);
    row_sum[v] = _mm512_load_ps(b.row_sum + v * kLanes);
    tile_max[v] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  }
  for (int kb = 0; kb < num_keys; kb += kKeyBlock) {
    const int64_t key_pos = k0 + kb;
    const float* key = k_head + key_pos * pb.k_tok;
    const int n = std::min(kKeyBlock, num_keys - kb);
    float* s = st + kb * kMaxRows;
    if (key_pos + kKeyBlock - 1 > pos_min)  // some key may lie past some row's position
      score_block<MV, true>(b.qt, D, key, pb.k_tok, n, static_cast<int32_t>(key_pos),
                            b.row_pos, s, tile_max);
    else
      score_block<MV, false>(b.qt, D, key, pb.k_tok, n, 0, b.row_pos, s, tile_max);
  }
  softmax_step<MV>(st, num_keys, tile_max, row_max, row_sum, alpha);
  const float* val = v_head + k0 * pb.v_tok;
  for (int d0 = 0; d0 < D; d0 += DB)
    pv_block<MV, DB>(b.ot + d0 * kMaxRows, st, val + d0, pb.v_tok, num_keys, alpha);
  for (int v = 0; v < MV; ++v) {
    _mm512_store_ps(b.row_max + v * kLanes, row_max[v]);
    _mm512_store_ps(b.row_sum + v * kLanes, row_sum[v]);
  }
}

// out = O / row sum.
void finish_block(const Problem& pb, const Item& it, const Block& b) {
  const int rows = b.num_tokens * it.num_heads;
  for (int r = 0; r < rows; ++r) {
    const int t = r / it.num_heads;
    const int head = it.kv_head * pb.group + it.head0 + r % it.num_heads;
    float* dst = pb.out + (b.tok0 + t) * pb.o_tok + head * pb.o_head;
    const float inv_sum = 1.0f / b.row_sum[r];
    for (int d = 0; d < pb.head_dim; ++d) dst[d] = b.ot[d * kMaxRows + r] * inv_sum;
  }
}

// Scratch per block: Q^T, O^T, then positions, running max and running sum of each row.
int64_t block_floats(int head_dim) { return 2 * head_dim * kMaxRows + 3 * kMaxRows; }

// scratch: S^T, then block_floats per block; 64-byte aligned.
void attend_item(const Problem& pb, const Item& it, int tokens_per_block, float* scratch) {
  const int D = pb.head_dim;
  float* st = scratch;  // [kKeyTile][kMaxRows], shared by the blocks
  Block blocks[kMaxBlocks];
  int num_blocks = 0;
  for (int t = 0; t < it.num_tokens; t += tokens_per_block) {
    float* base = scratch + kKeyTile * kMaxRows + num_blocks * block_floats(D);
    const int nt = std::min(tokens_per_block, it.num_tokens - t);
    blocks[num_blocks++] = {it.tok0 + t, nt, (nt * it.num_heads + kLanes - 1) / kLanes, base,
                            base + D * kMaxRows,
                            reinterpret_cast<int32_t*>(base + 2 * D * kMaxRows),
                            base + 2 * D * kMaxRows + kMaxRows,
                            base + 2 * D * kMaxRows + 2 * kMaxRows};
  }
  for (int i = 0; i < num_blocks; ++i) prepare_block(pb, it, blocks[i]);

  const float* k_head = pb.k + it.kv_head * pb.k_head;
  const float* v_head = pb.v + it.kv_head * pb.v_head;
  const int64_t pos_max = pb.start + it.tok0 + it.num_tokens - 1;
  // Tiles wholly above the diagonal are never visited: each block stops at its last row's
  // position.
  for (int64_t k0 = 0; k0 <= pos_max; k0 += kKeyTile) {
    for (int i = 0; i < num_blocks; ++i) {
      const Block& b = blocks[i];
      if (k0 > pb.start + b.tok0 + b.num_tokens - 1) continue;
      with_row_vecs(b.row_vecs,
                    [&](auto mv) { tile_block<mv.value>(pb, b, k_head, v_head, k0, st); });
    }
  }
  for (int i = 0; i < num_blocks; ++i) finish_block(pb, it, blocks[i]);
}

void check_operand(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be a CPU tensor");
  TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be float32, got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 3, name, " must be 3-D, got ", t.dim(), "-D");
  TORCH_CHECK(t.stride(2) == 1, name, "'s last dim must be contiguous");
  TORCH_CHECK(t.stride(0) >= 0 && t.stride(1) >= 0, name, " has negative strides");
}

}  // namespace

// q [T, H, D], k and v [start + T, KV, D], out [T, H, D] (written, also returned): query i
// at position start + i attends to keys [0, start + i], scale 1 / sqrt(D).
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t start, at::Tensor out) {
  check_operand(q, "q");
  check_operand(k, "k");
  check_operand(v, "v");
  check_operand(out, "out");
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2);
  const int64_t KV = k.size(1);
  TORCH_CHECK(start >= 0, "start must be >= 0, got ", start);
  TORCH_CHECK(k.sizes() == v.sizes(), "k and v shapes differ: ", k.sizes(), " vs ", v.sizes());
  TORCH_CHECK(k.size(0) == start + T && k.size(2) == D, "k must be [start + T, KV, ", D,
              "] = [", start + T, ", KV, ", D, "], got ", k.sizes());
  TORCH_CHECK(out.sizes() == q.sizes(), "out must be ", q.sizes(), ", got ", out.sizes());
  TORCH_CHECK(KV > 0 && H % KV == 0, "query heads (", H, ") must be a multiple of KV heads (",
              KV, ")");
  TORCH_CHECK(D % kLanes == 0 && D > 0 && D <= kMaxHeadDim,
              "head dim must be a multiple of 16 up to 256, got ", D);
  // Positions are compared as int32 lanes.
  TORCH_CHECK(start + T < std::numeric_limits<int32_t>::max(), "sequence too long");
  if (T == 0) return out;

  const Problem pb{q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                   out.data_ptr<float>(), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                   v.stride(0), v.stride(1), out.stride(0), out.stride(1), start,
                   static_cast<int>(D), static_cast<int>(H / KV)};

  // Heads of one group go together so each K/V element serves all of them; a token tile
  // fills the 48 rows of a block. Groups wider than 48 heads are split.
  const int heads_per_item = std::min(pb.group, kMaxRows);
  const int tokens_per_block = std::max(1, kMaxRows / heads_per_item);
  const int64_t num_subgroups = (pb.group + heads_per_item - 1) / heads_per_item;
  const int64_t total_blocks = (T + tokens_per_block - 1) / tokens_per_block * KV * num_subgroups;
  const int64_t threads = at::get_num_threads();
  // Up to 4 blocks per item (fewer K/V loads from the shared cache), while leaving at least
  // 8 items per thread for the balancing below.
  const int blocks_per_item =
      static_cast<int>(std::clamp<int64_t>(total_blocks / (8 * threads), 1, kMaxBlocks));
  const int tokens_per_item = tokens_per_block * blocks_per_item;
  std::vector<Item> items;
  // Last token tile first: items run longest first (their key range grows with the
  // position), so the dynamic schedule below ends with short items and threads finish
  // together.
  const int64_t num_tiles = (T + tokens_per_item - 1) / tokens_per_item;
  for (int64_t tile = num_tiles - 1; tile >= 0; --tile) {
    const int64_t tok0 = tile * tokens_per_item;
    const int nt = static_cast<int>(std::min<int64_t>(tokens_per_item, T - tok0));
    for (int g = 0; g < KV; ++g)
      for (int h0 = 0; h0 < pb.group; h0 += heads_per_item)
        items.push_back({tok0, g, h0, nt, std::min(heads_per_item, pb.group - h0)});
  }

  const int64_t num_workers = std::min<int64_t>(threads, static_cast<int64_t>(items.size()));
  const int64_t per_worker = kKeyTile * kMaxRows + blocks_per_item * block_floats(D);
  at::Tensor scratch = at::empty({num_workers, per_worker}, q.options());
  std::atomic<int64_t> next{0};
  // One chunk per worker; each pulls items off a shared counter.
  at::parallel_for(0, num_workers, 1, [&](int64_t worker, int64_t) {
    float* base = scratch.data_ptr<float>() + worker * per_worker;
    for (int64_t i = next.fetch_add(1); i < static_cast<int64_t>(items.size());
         i = next.fetch_add(1))
      attend_item(pb, items[i], tokens_per_block, base);
  });
  return out;
}

// Decode rows of many sequences at once, each one query per head against its own paged KV:
// q [B, H, D]; caches [num_blocks, block_size, KV, D] (contiguous); block_tables [B, max_blocks]
// int32; context_lens [B] int32 (0: a padding row, written as zeros); out [B, H, D]. One work
// item is a (row, KV head) pair holding the G query heads of that KV head, so each K/V element
// is read once per sequence; the items run in one parallel region (one per layer and step,
// instead of one per sequence). Exact softmax in two passes over a scratch row of scores.
at::Tensor paged_decode(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                        const at::Tensor& block_tables, const at::Tensor& context_lens,
                        at::Tensor out) {
  check_operand(q, "q");
  check_operand(out, "out");
  TORCH_CHECK(k_cache.dim() == 4 && k_cache.is_contiguous() && v_cache.is_contiguous() &&
                  k_cache.sizes() == v_cache.sizes() && k_cache.scalar_type() == at::kFloat,
              "caches must be contiguous float32 [blocks, block_size, KV, D] of one shape");
  TORCH_CHECK(block_tables.scalar_type() == at::kInt && block_tables.dim() == 2 &&
                  block_tables.is_contiguous(),
              "block_tables must be contiguous int32 [B, max_blocks]");
  TORCH_CHECK(context_lens.scalar_type() == at::kInt && context_lens.dim() == 1 &&
                  context_lens.is_contiguous(),
              "context_lens must be contiguous int32 [B]");
  const int64_t B = q.size(0), H = q.size(1), D = q.size(2);
  const int64_t block_size = k_cache.size(1), KV = k_cache.size(2);
  const int64_t max_blocks = block_tables.size(1), num_cache_blocks = k_cache.size(0);
  TORCH_CHECK(k_cache.size(3) == D, "cache head dim must be ", D);
  TORCH_CHECK(block_tables.size(0) == B && context_lens.size(0) == B, "one table and length per row");
  TORCH_CHECK(KV > 0 && H % KV == 0, "query heads must be a multiple of KV heads");
  TORCH_CHECK(D % kLanes == 0 && D > 0 && D <= kMaxHeadDim,
              "head dim must be a multiple of 16 up to 256, got ", D);
  TORCH_CHECK(out.sizes() == q.sizes(), "out must be ", q.sizes());
  const int group = static_cast<int>(H / KV);
  const int vecs = static_cast<int>(D / kLanes);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const float* qp = q.data_ptr<float>();
  const float* kp = k_cache.data_ptr<float>();
  const float* vp = v_cache.data_ptr<float>();
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  const int32_t* lens = context_lens.data_ptr<int32_t>();
  float* op = out.data_ptr<float>();
  const int64_t token_stride = KV * D;
  for (int64_t b = 0; b < B; ++b) {
    TORCH_CHECK(lens[b] >= 0 && lens[b] <= max_blocks * block_size,
                "context length of row ", b, " exceeds its block table");
  }
  at::parallel_for(0, B * KV, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / KV, g = item % KV;
      const int64_t ctx = lens[b];
      for (int h = 0; h < group; ++h) {
        float* o = op + b * out.stride(0) + (g * group + h) * out.stride(1);
        if (ctx == 0) std::fill(o, o + D, 0.0f);
      }
      if (ctx == 0) continue;
      scores.assign(static_cast<size_t>(group) * ctx, 0.0f);
      const int32_t* table = tables + b * max_blocks;
      // Pass 1: scores of every query head of the group against every key.
      for (int64_t t = 0; t < ctx; ++t) {
        const int64_t block = table[t / block_size];
        TORCH_CHECK(block >= 0 && block < num_cache_blocks, "block id out of range");
        const float* key = kp + (block * block_size + t % block_size) * token_stride + g * D;
        for (int h = 0; h < group; ++h) {
          const float* qh = qp + b * q.stride(0) + (g * group + h) * q.stride(1);
          __m512 acc = _mm512_setzero_ps();
          for (int i = 0; i < vecs; ++i)
            acc = _mm512_fmadd_ps(_mm512_loadu_ps(qh + i * kLanes),
                                  _mm512_loadu_ps(key + i * kLanes), acc);
          scores[h * ctx + t] = _mm512_reduce_add_ps(acc) * scale;
        }
      }
      // Pass 2: softmax per head, then the weighted sum of values.
      for (int h = 0; h < group; ++h) {
        float* row = scores.data() + h * ctx;
        const float top = *std::max_element(row, row + ctx);
        float total = 0.0f;
        for (int64_t t = 0; t < ctx; ++t) {
          row[t] = std::exp(row[t] - top);
          total += row[t];
        }
        const float inv = 1.0f / total;
        __m512 acc[kMaxHeadDim / kLanes];
        for (int i = 0; i < vecs; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t t = 0; t < ctx; ++t) {
          const int64_t block = table[t / block_size];
          const float* val = vp + (block * block_size + t % block_size) * token_stride + g * D;
          const __m512 w = _mm512_set1_ps(row[t] * inv);
          for (int i = 0; i < vecs; ++i)
            acc[i] = _mm512_fmadd_ps(w, _mm512_loadu_ps(val + i * kLanes), acc[i]);
        }
        float* o = op + b * out.stride(0) + (g * group + h) * out.stride(1);
        for (int i = 0; i < vecs; ++i) _mm512_storeu_ps(o + i * kLanes, acc[i]);
      }
    }
  });
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("causal_attention", &causal_attention, "Causal flash attention forward (fp32, AVX-512)",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("start"), py::arg("out"),
        py::call_guard<py::gil_scoped_release>());
  m.def("paged_decode", &paged_decode, "Paged decode attention of many rows (fp32, AVX-512)",
        py::arg("q"), py::arg("k_cache"), py::arg("v_cache"), py::arg("block_tables"),
        py::arg("context_lens"), py::arg("out"), py::call_guard<py::gil_scoped_release>());
}
