#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#ifdef USE_SHUFFLE
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#ifdef OUT_PROJ
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
// Fused attention for CPU devices, flash-attention style without shared memory or barriers:
// out = softmax(q kᵀ * scale + masks) v for one (b, h).
//
// A workgroup is LANES invocations (one SIMD vector on a CPU: lavapipe runs 8 lanes of one
// thread); invocation `lane` owns the R query rows q0 + r * LANES + lane. Its q rows (pre-scaled)
// and output accumulators are vec4s in registers (spilled to the stack, which is still far cheaper
// than any buffer access), and it runs its own online softmax, so no invocation ever waits for
// another. Keys go by in blocks of LANES:
//   1. With USE_SHUFFLE, lane i loads key j0 + i's row of K and every invocation gets key j0 + i
//      from lane i with subgroupShuffle (one vector permute per component on a CPU): one load
//      serves LANES keys. Without it every invocation loads every key itself.
//   2. Scores s = q·k (soft-capped with SOFT_CAP, then + mask) for R rows x LANES keys, -inf
//      where a boolean mask hides the key.
//   3. Online softmax per row: m' = max(m, max s), p = exp(s - m'), l' = l exp(m - m') + sum p,
//      acc' = acc exp(m - m') + sum p v, with V shared like K, or (PV_COLUMNS below) with each
//      lane accumulating some output columns of all the workgroup's rows.
// At the end out = acc / l, or 0 for a row that saw no visible key. Hidden keys get p = 0 by a
// select, never through exp(-inf) (a CPU exp may clamp its input and give 2^-127, not 0), and
// m - m' only ever subtracts a finite m', so neither NaN nor overflow appears (+-1e10 logits
// included). Memory is O(R * (D + DV)) per invocation whatever Sq and Sk are.
// Keys the workgroup's last row cannot see (causal) and keys >= key_length (read at run time)
// are never visited; inside a block, lanes past the last key load the last key again (a clamped
// index keeps loads in range without divergent control flow) and hide it.
//
// Why this shape: on a CPU a buffer load is a loop over the lanes with a bounds check per
// component (a vec4 costs as much as ~60 vec4 multiply-adds), a texel fetch a gather several times
// cheaper (TEXEL: q, k, v as texel buffers, head dims multiples of 4), and a register is free. So
// each loaded K/V element feeds LANES * R multiply-adds, and everything indexed by a loop counter
// lives in arrays whose loops are unrolled (D4, DV4, R and LANES are specialization constants): a
// dynamically indexed array would be kept in memory and addressed lane by lane. Only the loop over
// key blocks, and the loop over a block's keys in step 2 (its scores reach s[] through selects),
// stay loops: unrolling everything multiplies lavapipe's JIT time (seconds per pipeline) for no
// speed. On lavapipe 22.3 fma() compiles to a multiply and an add; the kernel reaches ~80% of that
// multiply + add peak at D = 64, R = 4.
// VEC4 (D and DV multiples of 4) reads q, k, v through vec4 views of the same bindings; other
// head dims read scalars and zero-fill the last chunk.
// ROPE_KV (attention_rows_texel_rope: a decoding step's rope_kv_cache fused in by the executor,
// src/graph/executor_build.cpp; TEXEL only): q, k and v of the step's one new row come unrotated
// from the projections (rope_kv_attention.glsl). Each invocation rotates its query rows and holds
// the new key and value rows (its own value columns with PV_COLUMNS), rounded to T as the caches
// hold them, and takes them for the key at the row's position instead of the caches' (stale) row;
// the first workgroup of the KV head writes them into the caches (bindings 13, 14). The results
// equal rope_kv_cache's dispatch followed by this kernel's, one dispatch fewer per layer.
// OUT_PROJ (attention_rows_texel_rope_wo_<weight type>, with ROPE_KV: the output projection and
// its residual fused in too, y = residual + W_O · concat(heads), W_O [N, H·DV] quantized): after
// writing its rows (a KV head's sq query heads, columns [c0, c0 + sq·DV) of W_O, c0 = bh·sq·DV)
// a workgroup multiplies them by that slice of every row of W_O (matmul_wq_rows.comp's layout:
// lanes on consecutive 32-element blocks of RO rows, one subgroupAdd per row) into its partial
// row [N] (fp32, binding 18). The last workgroup to finish (an atomic counter, binding 19, zero
// between runs: that workgroup resets it) adds partials 0, 1, ... in that order, then the
// residual, and writes y: the same bits whichever workgroup finishes last (no float atomics).

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LANES = 8;  // invocations; the subgroup size with USE_SHUFFLE
layout(constant_id = 1) const uint R = 4;      // query rows per invocation
layout(constant_id = 2) const uint D4 = 16;    // ceil(D / 4), D the head dim of q and k
layout(constant_id = 3) const uint DV4 = 16;   // ceil(DV / 4)
layout(constant_id = 4) const bool VEC4 = true;
layout(constant_id = 5) const bool HAS_MASK = false;
layout(constant_id = 6) const bool HAS_KEY_PADDING = false;
layout(constant_id = 7) const bool HAS_KEY_LENGTH = false;
layout(constant_id = 8) const bool CAUSAL = false;
layout(constant_id = 9) const bool PER_SEQUENCE = false;  // attention_sequences.glsl
layout(constant_id = 10) const bool SOFT_CAP = false;     // attention_soft_cap.glsl
#ifdef KV_QUANT
// KV_QUANT: the caches' types (kv_cache_types.glsl); head dims are multiples of 32 (VEC4).
#include "kv_cache_types.glsl"
layout(constant_id = 11) const uint K_TYPE = KV_Q8_0;
layout(constant_id = 12) const uint V_TYPE = KV_Q8_0;
#endif

#ifdef TEXEL
// P.V by columns where DV is a multiple of 4 * LANES: invocation `lane` accumulates output texels
// cc * LANES + lane (cc < DVC) of every row of the workgroup, so a probability is broadcast once
// per row and key instead of each V element once per key: 1/8 of the permutes at DV = 128,
// R = 2, and each V fetch reads LANES contiguous texels.
const uint DVC = (DV4 + LANES - 1) / LANES;  // texels per lane and row (>= 1: arrays need a size)
const bool PV_COLUMNS = DV4 % LANES == 0;
#else
const uint DVC = 1;
const bool PV_COLUMNS = false;
#endif

// Absent optional inputs are bound to q and never read. Q, K, V and Out have vec4 views too.
#ifdef TEXEL
// Texel buffers of 4-component texels (D and DV multiples of 4): a texel fetch is a plain gather
// on a CPU, several times cheaper than a buffer load, which checks bounds lane by lane.
layout(set = 0, binding = 0) uniform samplerBuffer q4;  // [B, H, Sq, D / 4]
layout(set = 0, binding = 1) uniform samplerBuffer k4;  // [B, Hkv, Sk, D / 4]
layout(set = 0, binding = 2) uniform samplerBuffer v4;  // [B, Hkv, Sk, DV / 4]
#else
layout(set = 0, binding = 0) readonly buffer Q { T q[]; };    // [B, H, Sq, D]
layout(set = 0, binding = 0) readonly buffer Q4 { T4 q4[]; };
#ifdef KV_QUANT
// Caches in their own types (kv_cache_types.glsl), read as 32-bit words and dequantized on load.
layout(set = 0, binding = 1) readonly buffer K { uint kw[]; };  // [B, Hkv, Sk, D] of K_TYPE
layout(set = 0, binding = 2) readonly buffer V { uint vw[]; };  // [B, Hkv, Sk, DV] of V_TYPE
#else
layout(set = 0, binding = 1) readonly buffer K { T k[]; };    // [B, Hkv, Sk, D]
layout(set = 0, binding = 1) readonly buffer K4 { T4 k4[]; };
layout(set = 0, binding = 2) readonly buffer V { T v[]; };    // [B, Hkv, Sk, DV]
layout(set = 0, binding = 2) readonly buffer V4 { T4 v4[]; };
#endif
#endif
layout(set = 0, binding = 3) readonly buffer Mask { T mask[]; };
layout(set = 0, binding = 4) readonly buffer KeyPadding { int key_padding[]; };  // [B, Sk]
layout(set = 0, binding = 5) readonly buffer KeyLength { int key_length[]; };   // [1]
#ifdef OUT_PROJ
// Read back by the workgroup's lanes for the projection.
layout(set = 0, binding = 6) coherent buffer Out { T o[]; };  // [B, H, Sq, DV]
layout(set = 0, binding = 6) coherent buffer Out4 { T4 o4[]; };
#else
layout(set = 0, binding = 6) writeonly buffer Out { T o[]; };  // [B, H, Sq, DV]
layout(set = 0, binding = 6) writeonly buffer Out4 { T4 o4[]; };
#endif
layout(set = 0, binding = 7) readonly buffer KvSlot { int kv_slot[]; };  // [B] (PER_SEQUENCE)
layout(push_constant) uniform Push {
  uint sq;
  uint sk;
  uint heads;
  uint q_blocks;          // ceil(sq / (LANES * R))
  uint groups;            // B * H * q_blocks
  float scale;
  uint d;                 // head dim of q and k
  uint dv;                // head dim of v
  uint kv_stride;         // unused here: the tiled kernel's field, one push layout for both
  uint mask_stride[4];    // over [B, H, Sq, Sk]; 0 where the mask broadcasts
  uint bh_base;           // the first (b, h) of this dispatch: q, k, v and out are bound as
                          // windows from there, the mask and key padding whole
  uint group;             // query heads per KV head (H / Hkv; 1 without grouped-query attention)
  uint kv_batches;        // batches of k and v (PER_SEQUENCE: slots, more than q's)
  float softcap;          // SOFT_CAP: the cap
  uint causal_at_length;  // causal aligned to key_length: row i sees keys j <= i + key_length - sq
#ifdef ROPE_KV
  // RopeKvPush in src/ops/attention_flash.hpp (rope_kv_attention.glsl reads them).
  uint q_stride, k_stride, v_stride;
  uint q_off, k_off, v_off;
  uint q_heads;    // H (q's heads before a grouped step is restacked)
  uint half_dims;  // rotated dims / 2
  int rope_base;   // the static position offset
  uint neox;       // pairs (i, i + dims / 2), else (2i, 2i + 1)
#endif
#ifdef OUT_PROJ
  uint out_n;  // N, W_O's rows (src/ops/attention.cpp's OutProjPush)
#endif
} p;

#ifdef ROPE_KV
#define ROPE_KV_BINDING 8
#include "rope_kv_attention.glsl"
layout(set = 0, binding = 13) writeonly buffer CacheK { T4 cache_k4[]; };  // k's and v's bytes
layout(set = 0, binding = 14) writeonly buffer CacheV { T4 cache_v4[]; };

// The row of q (src 0) or k (src 1) whose first column is at `base`, rotated at position `at`
// and rounded to T as the caches hold it (no 16-bit locals: storage types only), in vec4 chunks.
// Not unrolled: with D4 * 4 copies of the rotation per row, lavapipe's JIT took minutes at
// D = 256 (Gemma 3); the caller copies `out` into its registers with constant indices.
void rope_kv_row_chunks(uint src, uint base, int at, out vec4 chunks[D4]) {
  [[dont_unroll]] for (uint c = 0; c < D4; ++c) {
    vec4 x;
    [[unroll]] for (uint e = 0; e < 4u; ++e) {
      float y;
      if (src == 0u) {
        ROPE_COLUMN(src_q, base, 4u * c + e, at, y);
      } else {
        ROPE_COLUMN(src_k, base, 4u * c + e, at, y);
      }
      x[e] = float(T(y));
    }
    chunks[c] = x;
  }
}
#endif

#ifdef OUT_PROJ
layout(constant_id = 11) const uint KBO = 6;  // 32-element blocks of the slice: sq * DV / 32
layout(constant_id = 12) const uint RO = 4;   // rows of W_O per round: LANES / gcd(KBO, LANES)
const uint SLOTS_O = (RO * KBO + LANES - 1u) / LANES;  // rounds of LANES blocks per RO rows
layout(set = 0, binding = 15) uniform usamplerBuffer W;  // W_O [N, H * DV], raw 16-byte texels
layout(set = 0, binding = 16) readonly buffer Residual { T residual[]; };  // [N]
layout(set = 0, binding = 17) writeonly buffer Y { T y_out[]; };           // [N]
layout(set = 0, binding = 18) coherent buffer Partials { float partial[]; };  // [workgroups, N]
layout(set = 0, binding = 19) coherent buffer Finished { uint finished; };
#define WQ_BLOCKS 1u
#include "wq_texel.glsl"

// The workgroup's rows (already in o) times its slice of W_O, then the last workgroup's sum.
void out_proj(uint bh) {
  memoryBarrierBuffer();
  barrier();
  const uint lane = gl_SubgroupInvocationID;
  const uint c0 = bh * p.sq * p.dv, N = p.out_n;
  // The lane's block of round i (the same for every RO rows) as 8 texels, and its halves' sums.
  vec4 xc[SLOTS_O * 8u];
  float sum_lo[SLOTS_O], sum_hi[SLOTS_O];
  uint slot_row[SLOTS_O], slot_block[SLOTS_O];
  bool slot_live[SLOTS_O];
  [[unroll]] for (uint i = 0; i < SLOTS_O; ++i) {
    const uint pair = min(i * LANES + lane, RO * KBO - 1u);
    slot_live[i] = i * LANES + lane < RO * KBO;
    slot_row[i] = pair / KBO;
    slot_block[i] = pair % KBO;
    float lo = 0.0, hi = 0.0;
    [[unroll]] for (uint q = 0; q < 8u; ++q) {
      const vec4 x = vec4(o4[c0 / 4u + slot_block[i] * 8u + q]);
      xc[i * 8u + q] = x;
      if (q < 4u) lo += x.x + x.y + x.z + x.w;
      else hi += x.x + x.y + x.z + x.w;
    }
    sum_lo[i] = lo;
    sum_hi[i] = hi;
  }
  const uint row_halfwords = row_hw(p.q_heads * p.dv), b0 = c0 / 32u;
  [[dont_unroll]] for (uint first = 0; first < N; first += RO) {
    float acc[RO];
    [[unroll]] for (uint r = 0; r < RO; ++r) acc[r] = 0.0;
    [[unroll]] for (uint i = 0; i < SLOTS_O; ++i) {
      const uint r = slot_row[i];
      load_block(0u, min(first + r, N - 1u) * row_halfwords, b0 + slot_block[i]);
      float raw_lo = 0.0, raw_hi = 0.0;
      [[unroll]] for (uint e = 0; e < 32u; ++e) {
        const float x = xc[i * 8u + e / 4u][e % 4u];
        if (e < 16u) raw_lo += quant(0u, e) * x;
        else raw_hi += quant(0u, e) * x;
      }
      const float v = bd[0] * raw_lo + bm[0] * sum_lo[i] + bd[1] * raw_hi + bm[1] * sum_hi[i];
      [[unroll]] for (uint k = 0; k < RO; ++k)
        if (slot_live[i] && r == k) acc[k] += v;
    }
    [[unroll]] for (uint r = 0; r < RO; ++r) {
      const float total = subgroupAdd(acc[r]);
      if (lane == r % LANES && first + r < N) partial[bh * N + first + r] = total;
    }
  }
  // Every lane's partials before the count; the last workgroup sees every workgroup's.
  memoryBarrierBuffer();
  barrier();
  uint done = 0u;
  if (lane == 0u) done = atomicAdd(finished, 1u) + 1u;
  if (subgroupShuffle(done, 0u) != p.groups) return;  // uniform
  memoryBarrierBuffer();
  for (uint n = lane; n < N; n += LANES) {
    float s = 0.0;
    for (uint g = 0; g < p.groups; ++g) s += partial[g * N + n];
    y_out[n] = T(s + float(residual[n]));
  }
  if (lane == 0u) atomicExchange(finished, 0u);
}
#endif

#include "attention_sequences.glsl"
#include "attention_soft_cap.glsl"

// Chunk c (elements 4c..4c+3) of the row that starts at element `base` of q, k or v.
#ifdef TEXEL
vec4 load_q(uint base, uint c) { return texelFetch(q4, int(base / 4 + c)); }
vec4 load_k(uint base, uint c) { return texelFetch(k4, int(base / 4 + c)); }
vec4 load_v(uint base, uint c) { return texelFetch(v4, int(base / 4 + c)); }
#else
#ifdef KV_QUANT
#define KV_READ_FN kv_read_k
#define KV_READ_BLOCK_FN kv_read_k_block
#define KV_READ_BUF kw
#define KV_READ_TYPE K_TYPE
#include "kv_cache_read.glsl"
#define KV_READ_FN kv_read_v
#define KV_READ_BLOCK_FN kv_read_v_block
#define KV_READ_BUF vw
#define KV_READ_TYPE V_TYPE
#include "kv_cache_read.glsl"
// A K or V row is read a 32-element block (8 chunks) at a time, each block's words loaded once
// (kv_read_*_block), not 4 elements at a time: a quantized block's scale and straddling words
// would be loaded again for each of its 8 chunks.
#define LOAD_ROW(block_fn, base, dst, n4)                 \
  [[unroll]] for (uint c8 = 0; c8 < (n4); c8 += 8u) {     \
    vec4 blk[8];                                          \
    block_fn((base) + 4u * c8, blk);                      \
    [[unroll]] for (uint c = 0; c < 8u; ++c) dst[c8 + c] = blk[c]; \
  }
#endif
vec4 load_q(uint base, uint c) {
  if (VEC4) return vec4(q4[base / 4 + c]);
  vec4 r = vec4(0.0);
  [[unroll]] for (uint e = 0; e < 4; ++e)
    if (4 * c + e < p.d) r[e] = float(q[base + 4 * c + e]);
  return r;
}
#ifndef KV_QUANT
vec4 load_k(uint base, uint c) {
  if (VEC4) return vec4(k4[base / 4 + c]);
  vec4 r = vec4(0.0);
  [[unroll]] for (uint e = 0; e < 4; ++e)
    if (4 * c + e < p.d) r[e] = float(k[base + 4 * c + e]);
  return r;
}
vec4 load_v(uint base, uint c) {
  if (VEC4) return vec4(v4[base / 4 + c]);
  vec4 r = vec4(0.0);
  [[unroll]] for (uint e = 0; e < 4; ++e)
    if (4 * c + e < p.dv) r[e] = float(v[base + 4 * c + e]);
  return r;
}
#endif
#endif

void main() {
  uint group = flat_workgroup_id();
  if (group >= p.groups) return;  // uniform: the whole workgroup leaves
  const uint lane = gl_LocalInvocationID.x;
  const uint bh = group / p.q_blocks;
  const uint q0 = (group % p.q_blocks) * (LANES * R);
  const uint b = (p.bh_base + bh) / p.heads, h = (p.bh_base + bh) % p.heads;
  const uint D = p.d, DV = p.dv;

  vec4 qr[R * D4];
  // Both accumulator layouts are declared at full size (every index stays in bounds, even in
  // the branch that specialization removes); the unused one is dead code once specialized.
  vec4 acc[R * DV4];
  vec4 acc_cols[R * LANES * DVC];  // [row of the workgroup][cc]
  float m[R], l[R];
#ifdef ROPE_KV
  const uint pos = rope_kv_row(p.sk);
  const int at = clamp(p.rope_base + int(pos), 0, kMaxPosition);
#endif
  [[unroll]] for (uint r = 0; r < R; ++r) {
    uint row = min(q0 + r * LANES + lane, p.sq - 1);  // rows past the end compute garbage, unstored
    uint base = (bh * p.sq + row) * D;
#ifdef ROPE_KV
    const uint q_row = (p.bh_base + bh) * p.sq + row;  // b * H + h: one query per head
    const uint q_src = (q_row / p.q_heads) * p.q_stride + p.q_off + (q_row % p.q_heads) * D;
    vec4 rotated[D4];
    rope_kv_row_chunks(0u, q_src, at, rotated);
    [[unroll]] for (uint c = 0; c < D4; ++c) qr[r * D4 + c] = rotated[c] * p.scale;
#else
    [[unroll]] for (uint c = 0; c < D4; ++c) qr[r * D4 + c] = load_q(base, c) * p.scale;
#endif
    if (PV_COLUMNS) {
      [[unroll]] for (uint e = 0; e < LANES * DVC; ++e) acc_cols[r * LANES * DVC + e] = vec4(0.0);
    } else {
      [[unroll]] for (uint c = 0; c < DV4; ++c) acc[r * DV4 + c] = vec4(0.0);
    }
    m[r] = NEG_INF;
    l[r] = 0.0;
  }

  // Keys at or past key_end are hidden from every row of the block.
  int key_end = int(p.sk);
  if (HAS_KEY_LENGTH) key_end = min(key_end, key_length[key_length_index(b)]);
  // Row i sees keys j <= i + causal_shift: the queries are the last sq of the sk keys, or of the
  // key_length valid ones (a KV cache's newest rows, whatever the cache's size).
  const int causal_end =
      HAS_KEY_LENGTH && p.causal_at_length != 0u ? key_length[key_length_index(b)] : int(p.sk);
  const int causal_shift = causal_end - int(p.sq);
  if (CAUSAL) key_end = min(key_end, int(min(q0 + LANES * R, p.sq)) - 1 + causal_shift + 1);
  const uint keys = uint(max(key_end, 0));

  // Grouped-query attention: query head h reads KV head h / group; a window starts at a
  // multiple of group query heads, so its KV slice is bh / group of the KV window.
  const uint kv = kv_slice(b, h, p.heads, p.group, p.kv_batches, bh / p.group);
  const uint k_base = kv * p.sk * D, v_base = kv * p.sk * DV;
#ifdef ROPE_KV
  // The new row of this KV head, in every invocation: the whole key, and the value's chunks
  // that the invocation reads (its columns with PV_COLUMNS, else all).
  vec4 new_k[D4];
  vec4 new_v[PV_COLUMNS ? DVC : DV4];
  {
    const uint kv_pair = (p.bh_base + bh) / p.group, kv_heads = p.heads / p.group;
    const uint b_kv = kv_pair / kv_heads, g = kv_pair % kv_heads;
    const uint k_src = b_kv * p.k_stride + p.k_off + g * D, v_src = b_kv * p.v_stride + p.v_off + g * DV;
    // The first workgroup of the KV head writes the row, each invocation its chunks.
    const bool writes = bh % p.group == 0u && group % p.q_blocks == 0u;
    rope_kv_row_chunks(1u, k_src, at, new_k);
    [[unroll]] for (uint c = 0; c < D4; ++c)
      if (writes && c % LANES == lane) cache_k4[(k_base + pos * D) / 4u + c] = T4(new_k[c]);
    [[unroll]] for (uint c = 0; c < (PV_COLUMNS ? DVC : DV4); ++c) {
      const uint chunk = PV_COLUMNS ? c * LANES + lane : c;
      const uint at_v = v_src + 4u * chunk;
      const vec4 x = vec4(float(src_v[at_v]), float(src_v[at_v + 1u]), float(src_v[at_v + 2u]),
                          float(src_v[at_v + 3u]));
      new_v[c] = x;
      if (writes && (PV_COLUMNS || c % LANES == lane)) cache_v4[(v_base + pos * DV) / 4u + chunk] = T4(x);
    }
  }
#endif
  const uint mask_base = b * p.mask_stride[0] + h * p.mask_stride[1];
  for (uint j0 = 0; j0 < keys; j0 += LANES) {
#ifdef USE_SHUFFLE
    const uint jl = min(j0 + lane, keys - 1);  // the key this lane loads for everyone
    vec4 kl[D4];
#ifdef KV_QUANT
    LOAD_ROW(kv_read_k_block, k_base + jl * D, kl, D4)
#else
    [[unroll]] for (uint c = 0; c < D4; ++c) kl[c] = load_k(k_base + jl * D, c);
#endif
#ifdef ROPE_KV
    if (jl == pos) {
      [[unroll]] for (uint c = 0; c < D4; ++c) kl[c] = new_k[c];
    }
#endif
    int pad_l = 0;
    if (HAS_KEY_PADDING) pad_l = key_padding[b * p.sk + jl];
#endif

    // Scores of R rows x LANES keys. The loop over the block's keys is not unrolled (only the
    // loops over head-dim chunks and rows in it are): unrolling it too multiplies the code, and
    // lavapipe's JIT time, by LANES. Key i's score goes to s[r * LANES + i] through a chain of
    // selects, which keeps s in registers (a dynamically indexed array would live in memory).
    float s[R * LANES];
    [[unroll]] for (uint e = 0; e < R * LANES; ++e) s[e] = 0.0;
    [[dont_unroll]] for (uint i = 0; i < LANES; ++i) {
      float si[R];
      [[unroll]] for (uint r = 0; r < R; ++r) si[r] = 0.0;
#if defined(KV_QUANT) && !defined(USE_SHUFFLE)
      vec4 ki[D4];
      LOAD_ROW(kv_read_k_block, k_base + min(j0 + i, keys - 1) * D, ki, D4)
#endif
      [[unroll]] for (uint c = 0; c < D4; ++c) {
#ifdef USE_SHUFFLE
        vec4 kk = subgroupShuffle(kl[c], i);
#elif defined(KV_QUANT)
        vec4 kk = ki[c];
#else
        vec4 kk = load_k(k_base + min(j0 + i, keys - 1) * D, c);
#endif
        [[unroll]] for (uint r = 0; r < R; ++r) si[r] += dot(qr[r * D4 + c], kk);
      }
      [[unroll]] for (uint r = 0; r < R; ++r)
        [[unroll]] for (uint e = 0; e < LANES; ++e)
          s[r * LANES + e] = e == i ? si[r] : s[r * LANES + e];
    }

    // Masks, then the online softmax update of each row.
    float pr[R * LANES];
    float alpha_r[R];
    [[unroll]] for (uint r = 0; r < R; ++r) {
      const uint row = q0 + r * LANES + lane;
      float m_new = m[r];
      [[unroll]] for (uint i = 0; i < LANES; ++i) {
        const uint j = j0 + i;
        bool visible = j < keys;
        if (CAUSAL) visible = visible && int(j) <= int(row) + causal_shift;
        if (HAS_KEY_PADDING) {
#ifdef USE_SHUFFLE
          visible = visible && subgroupShuffle(pad_l, i) == 0;
#else
          visible = visible && key_padding[b * p.sk + min(j, keys - 1)] == 0;
#endif
        }
        float sv = attention_soft_cap(s[r * LANES + i]);
        if (HAS_MASK)
          sv += float(mask[mask_base + min(row, p.sq - 1) * p.mask_stride[2] +
                           min(j, keys - 1) * p.mask_stride[3]]);
        sv = visible ? sv : NEG_INF;
        s[r * LANES + i] = sv;
        m_new = max(m_new, sv);
      }
      // m_safe is finite: a row that has seen nothing keeps acc = l = 0 and all p = 0.
      const float m_safe = m_new == NEG_INF ? 0.0 : m_new;
      const float alpha = m[r] == NEG_INF ? 0.0 : exp(m[r] - m_safe);
      float sum = 0.0;
      [[unroll]] for (uint i = 0; i < LANES; ++i) {
        float sv = s[r * LANES + i];
        float pv = sv == NEG_INF ? 0.0 : exp(sv - m_safe);
        pr[r * LANES + i] = pv;
        sum += pv;
      }
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
      alpha_r[r] = alpha;
      if (!PV_COLUMNS) {
        [[unroll]] for (uint c = 0; c < DV4; ++c) acc[r * DV4 + c] *= alpha;
      }
    }

#ifdef TEXEL
    // acc_cols += p v by columns: this lane's V texels of the block's keys are fetched first, then
    // each row's probabilities and rescale factor come from the lane that owns the row (one
    // permute each) and feed DVC texels of multiply-adds read straight from vc.
    if (PV_COLUMNS) {
      vec4 vc[LANES * DVC];  // [key of the block][cc]: this lane's texel cc * LANES + lane
      [[unroll]] for (uint i = 0; i < LANES; ++i) {
        const uint jv = min(j0 + i, keys - 1);
        [[unroll]] for (uint cc = 0; cc < DVC; ++cc) {
          vc[i * DVC + cc] = load_v(v_base + jv * DV, cc * LANES + lane);
#ifdef ROPE_KV
          if (jv == pos) vc[i * DVC + cc] = new_v[cc];
#endif
        }
      }
      [[unroll]] for (uint r = 0; r < R; ++r) {
        [[unroll]] for (uint src = 0; src < LANES; ++src) {
          const uint row = r * LANES + src;
          const float a = subgroupShuffle(alpha_r[r], src);
          float pb[LANES];
          [[unroll]] for (uint i = 0; i < LANES; ++i) pb[i] = subgroupShuffle(pr[r * LANES + i], src);
          [[unroll]] for (uint cc = 0; cc < DVC; ++cc) {
            vec4 y = acc_cols[row * DVC + cc] * a;
            [[unroll]] for (uint i = 0; i < LANES; ++i) y += pb[i] * vc[i * DVC + cc];
            acc_cols[row * DVC + cc] = y;
          }
        }
      }
    } else
#endif
    {
    // acc += p v, V shared like K: chunk by chunk with the block's keys innermost (unrolled), so
    // that each accumulator chunk stays in a register for LANES multiply-adds.
#ifdef USE_SHUFFLE
    // Every fetch first: a texel fetch is a call into the driver, and the accumulators would be
    // saved and restored around each one.
    vec4 vl[DV4];
#ifdef KV_QUANT
    LOAD_ROW(kv_read_v_block, v_base + jl * DV, vl, DV4)
#else
    [[unroll]] for (uint c = 0; c < DV4; ++c) vl[c] = load_v(v_base + jl * DV, c);
#endif
#ifdef ROPE_KV
    if (!PV_COLUMNS && jl == pos) {
      [[unroll]] for (uint c = 0; c < DV4; ++c) vl[c] = new_v[min(c, (PV_COLUMNS ? DVC : DV4) - 1u)];
    }
#endif
    [[unroll]] for (uint c = 0; c < DV4; ++c) {
      [[unroll]] for (uint i = 0; i < LANES; ++i) {
        const vec4 vv = subgroupShuffle(vl[c], i);
        [[unroll]] for (uint r = 0; r < R; ++r) acc[r * DV4 + c] += pr[r * LANES + i] * vv;
      }
    }
#else
    // Without shuffles every lane loads every key's V row: key by key (not unrolled, which would
    // multiply the buffer loads' code by LANES), probabilities taken out of pr by selects.
    [[dont_unroll]] for (uint i = 0; i < LANES; ++i) {
      float pi[R];
      [[unroll]] for (uint r = 0; r < R; ++r) {
        pi[r] = 0.0;
        [[unroll]] for (uint e = 0; e < LANES; ++e) pi[r] = e == i ? pr[r * LANES + e] : pi[r];
      }
      const uint jv = min(j0 + i, keys - 1);
#ifdef KV_QUANT
      vec4 vi[DV4];
      LOAD_ROW(kv_read_v_block, v_base + jv * DV, vi, DV4)
#endif
      [[unroll]] for (uint c = 0; c < DV4; ++c) {
#ifdef KV_QUANT
        const vec4 vv = vi[c];
#else
        const vec4 vv = load_v(v_base + jv * DV, c);
#endif
        [[unroll]] for (uint r = 0; r < R; ++r) acc[r * DV4 + c] += pi[r] * vv;
      }
    }
#endif
    }
  }

#ifdef TEXEL
  if (PV_COLUMNS) {
    [[unroll]] for (uint r = 0; r < R; ++r) {
      [[unroll]] for (uint src = 0; src < LANES; ++src) {
        const uint row = q0 + r * LANES + src;
        const float lr = subgroupShuffle(l[r], src);
        const float inv = lr > 0.0 ? 1.0 / lr : 0.0;
        if (row < p.sq) {  // uniform
          const uint base = (bh * p.sq + row) * DV / 4;
          [[unroll]] for (uint cc = 0; cc < DVC; ++cc)
            o4[base + cc * LANES + lane] = T4(acc_cols[(r * LANES + src) * DVC + cc] * inv);
        }
      }
    }
#ifdef OUT_PROJ
    out_proj(bh);
#endif
    return;
  }
#endif
  [[unroll]] for (uint r = 0; r < R; ++r) {
    const uint row = q0 + r * LANES + lane;
    if (row < p.sq) {
      const float inv = l[r] > 0.0 ? 1.0 / l[r] : 0.0;
      const uint base = (bh * p.sq + row) * DV;
      [[unroll]] for (uint c = 0; c < DV4; ++c) {
        vec4 y = acc[r * DV4 + c] * inv;
        if (VEC4) {
          o4[base / 4 + c] = T4(y);
        } else {
          [[unroll]] for (uint e = 0; e < 4; ++e)
            if (4 * c + e < DV) o[base + 4 * c + e] = T(y[e]);
        }
      }
    }
  }
#ifdef OUT_PROJ
  out_proj(bh);
#endif
}
