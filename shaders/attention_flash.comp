#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// Flash attention on cooperative matrices (shaders/coopmat.glsl): out = softmax(q kᵀ * scale +
// masks) v with QKᵀ and P·V as f16 MMAs accumulated in fp32, and the online softmax in fp32.
// One source, three kernels: attention_flash_khr, attention_flash_nv (where KHR is absent) and
// attention_flash_emu (the emulation, which tests/flash_attention_test.cpp runs on lavapipe in
// every configuration of vk::flash_configs()). f16 or f32 storage: f32 is rounded to f16 when
// staged (vk::FlashTiles::f32_storage says when that is taken).
//
// Tiling. A workgroup of WARPS subgroups owns BR = WARPS * ROW_TILES * LM query rows of one
// (b, h); subgroup w owns ROW_TILES tiles of LM rows, whose Q fragments (ROW_TILES x D_CAP / LK
// A operands) and output accumulators (ROW_TILES x DV_CAP / LN) stay in registers throughout.
// The keys go in blocks of BC, staged in shared memory as f16 rows padded by 8 halves (16 bytes,
// so that a fragment's rows start in different banks). One staging buffer serves K and then V,
// and the global loads of the next operand run into registers while the subgroups compute
// (K of block j + 1 during P·V of block j, V of block j during QKᵀ and the softmax).
// Per block and row tile of a subgroup:
//   1. S = Q Kᵀ as LM x BC accumulators, stored to the subgroup's fp32 score tile s_s.
//   2. The subgroup's lanes, G = SG / LM per row (or LM / SG rows per lane), read the rows of
//      s_s: logits x = s * scale + mask (or -inf where hidden), the new row max m', the
//      probabilities p = exp(x - m') as f16 into p_s (the A operand of P·V), and their partial
//      sum in registers; alpha = exp(m - m').
//   3. Rows cannot be found in an accumulator (its layout belongs to the implementation), so
//      the output is rescaled through a fragment: each row's alpha is written across an LM x LN
//      tile of s_s, loaded as an accumulator, and multiplied into every output accumulator
//      element by element (same type, same layout: layout-agnostic).
// Then P·V adds into the output accumulators. At the end the same trick divides by the row sums
// (0 for a row without a single visible key: zeros, never NaN), and each tile goes through s_s
// to the output with bounds checks. While m is -inf, p and alpha are set explicitly, so -inf
// never meets -inf in a subtraction.
//
// Causal blocks past the last row's limit are never visited, and the heaviest query blocks run
// first. Keys past key_length and rows past sq are staged as zeros (p = 0 there, and no NaN from
// stale memory). Grouped-query attention: query head h reads KV head h / group in place.

layout(local_size_x_id = 0) in;  // SG * WARPS
layout(constant_id = 1) const uint SG = 32;  // invocations per subgroup
layout(constant_id = 2) const uint LM = 16;  // the MMA shape
layout(constant_id = 3) const uint LN = 16;
layout(constant_id = 4) const uint LK = 16;
layout(constant_id = 5) const uint WARPS = 4;
layout(constant_id = 6) const uint ROW_TILES = 1;
layout(constant_id = 7) const uint BC = 32;       // keys per block: a multiple of LM, LN, LK, 16
layout(constant_id = 8) const uint D_CAP = 64;    // >= d, a multiple of LK and 16
layout(constant_id = 9) const uint DV_CAP = 64;   // >= dv, a multiple of LN and 16
layout(constant_id = 10) const bool HAS_MASK = false;
layout(constant_id = 11) const bool HAS_KEY_PADDING = false;
layout(constant_id = 12) const bool HAS_KEY_LENGTH = false;
layout(constant_id = 13) const bool CAUSAL = false;
layout(constant_id = 14) const bool VEC8 = false;  // d and dv multiples of 8: vector loads
layout(constant_id = 15) const bool SOFT_CAP = false;  // attention_soft_cap.glsl

#define COOPMAT_M LM
#define COOPMAT_N LN
#define COOPMAT_K LK
#define COOPMAT_SUBGROUP_SIZE SG
#define COOPMAT_SUBGROUPS WARPS
#include "coopmat.glsl"
#include "attention_flash.glsl"

layout(set = 0, binding = 6) writeonly buffer Out { T o[]; };  // [B, H, Sq, DV]
// The same buffers, for 8 elements per load (VEC8).
#if defined(DTYPE_F16)
layout(set = 0, binding = 0) readonly buffer Q8 { uvec4 q8[]; };
layout(set = 0, binding = 1) readonly buffer K8 { uvec4 k8[]; };
layout(set = 0, binding = 2) readonly buffer V8 { uvec4 v8[]; };
#else
layout(set = 0, binding = 0) readonly buffer Q4 { vec4 q4[]; };
layout(set = 0, binding = 1) readonly buffer K4 { vec4 k4[]; };
layout(set = 0, binding = 2) readonly buffer V4 { vec4 v4[]; };
#endif

// Loops over rows, columns and fragment elements: left to the compiler on real devices, kept as
// loops in the emulation (lavapipe compiles it in a fraction of the time then).
#if defined(COOPMAT_EMULATE)
#define FLASH_LOOP [[dont_unroll]]
#else
#define FLASH_LOOP
#endif

const uint WG = SG * WARPS;
const uint PAD = 8;                      // halves
const uint KS = D_CAP + PAD;             // row stride of a staged K block (and of Q), halves
const uint VS = DV_CAP + PAD;            // row stride of a staged V block
const uint KV_ROW = KS > VS ? KS : VS;
const uint D_TILES = D_CAP / LK;         // k-steps of Q Kᵀ
const uint S_TILES = BC / LN;            // column tiles of S
const uint P_STEPS = BC / LK;            // k-steps of P·V
const uint O_TILES = DV_CAP / LN;        // column tiles of the output
const uint R = LM * ROW_TILES;           // query rows per subgroup
const uint BR = R * WARPS;               // query rows per workgroup
const uint PS = BC + PAD;                // row stride of p_s, halves
const uint G = SG > LM ? SG / LM : 1;    // lanes per row in the softmax
const uint RL = LM > SG ? LM / SG : 1;   // rows per lane in the softmax
const uint ROW_STEP = SG / G;            // between the rows of one lane
const uint K_CHUNKS = BC * D_CAP / 8;    // 8-half chunks of a K block
const uint V_CHUNKS = BC * DV_CAP / 8;
const uint KV_PER = ((K_CHUNKS > V_CHUNKS ? K_CHUNKS : V_CHUNKS) + WG - 1) / WG;

// vk::FlashLaunch::shared_bytes counts these (and the emulation's scratch).
shared uvec4 kv_s[BC * KV_ROW / 8];         // a K or V block (or rows of Q), 8 halves each
shared float s_s[WARPS * LM * BC];          // per subgroup: scores, rescale tiles, output tiles
shared float16_t p_s[WARPS * R * PS];       // per subgroup: probabilities of its rows
shared float red_s[WARPS * LM * G];         // per subgroup: partial row maxima and sums

uvec4 rkv[KV_PER];           // the next K or V block between its global loads and shared stores
float m_run[ROW_TILES * RL];  // running max of this lane's rows
float l_run[ROW_TILES * RL];  // this lane's part of their running sums

uint bh, b, h, q0, keys;

// 8 elements of row `row` (of `rows`) from column `col` (of `cols`) of the matrix at element
// `base` of q (which = 0), k (1) or v (2), as 8 halves; zeros outside it.
uvec4 load8(uint which, uint base, uint row, uint col, uint rows, uint cols) {
  if (row >= rows || col >= cols) return uvec4(0);
  const uint e = base + row * cols + col;
  if (VEC8) {  // cols % 8 == 0: all 8 are inside, and e % 8 == 0
#if defined(DTYPE_F16)
    return which == 0 ? q8[e / 8] : which == 1 ? k8[e / 8] : v8[e / 8];
#else
    const vec4 x = which == 0 ? q4[e / 4] : which == 1 ? k4[e / 4] : v4[e / 4];
    const vec4 y = which == 0 ? q4[e / 4 + 1] : which == 1 ? k4[e / 4 + 1] : v4[e / 4 + 1];
    return uvec4(packHalf2x16(x.xy), packHalf2x16(x.zw), packHalf2x16(y.xy), packHalf2x16(y.zw));
#endif
  }
  float x[8];
  COOPMAT_UNROLL for (uint j = 0; j < 8; ++j) {
    x[j] = 0.0;
    if (col + j < cols) x[j] = float(which == 0 ? q[e + j] : which == 1 ? k[e + j] : v[e + j]);
  }
  return uvec4(packHalf2x16(vec2(x[0], x[1])), packHalf2x16(vec2(x[2], x[3])),
               packHalf2x16(vec2(x[4], x[5])), packHalf2x16(vec2(x[6], x[7])));
}

// Keys [c0, c0 + BC) of k (which = 1, `cols` = d, `cap` = D_CAP) or v (2) into rkv.
void load_block(uint which, uint base, uint c0, uint cols, uint cap) {
  const uint per_row = cap / 8, chunks = BC * per_row;
  COOPMAT_UNROLL for (uint t = 0; t < KV_PER; ++t) {
    const uint c = gl_LocalInvocationIndex + t * WG;
    if (c < chunks) rkv[t] = load8(which, base, c0 + c / per_row, (c % per_row) * 8, keys, cols);
  }
}

// rkv into kv_s, rows of `stride` halves.
void store_block(uint cap, uint stride) {
  const uint per_row = cap / 8, chunks = BC * per_row;
  COOPMAT_UNROLL for (uint t = 0; t < KV_PER; ++t) {
    const uint c = gl_LocalInvocationIndex + t * WG;
    if (c < chunks) kv_s[((c / per_row) * stride + (c % per_row) * 8) / 8] = rkv[t];
  }
}

// The first half of the softmax of row tile rt, block c0: logits into s_s, and each lane's
// partial maximum of its columns into red_s.
void softmax_max(uint warp, uint lane, uint rt, uint c0) {
  const uint sb = warp * LM * BC, g = lane % G;
  FLASH_LOOP for (uint i = 0; i < RL; ++i) {
    const uint r = lane / G + i * ROW_STEP;
    const uint row = q0 + (warp * ROW_TILES + rt) * LM + r;
    float mx = NEG_INF;
    FLASH_LOOP for (uint c = g; c < BC; c += G) {
      const float x = attention_logit(s_s[sb + r * BC + c], b, h, row, c0 + c, keys);
      s_s[sb + r * BC + c] = x;
      mx = max(mx, x);
    }
    red_s[(warp * LM + r) * G + g] = mx;
  }
}

// The second half: the row max over the lanes, probabilities into p_s, the running max and
// sums, and alpha across the row's first LN columns of s_s (the rescale tile).
void softmax_exp(uint warp, uint lane, uint rt) {
  const uint sb = warp * LM * BC, g = lane % G;
  FLASH_LOOP for (uint i = 0; i < RL; ++i) {
    const uint r = lane / G + i * ROW_STEP, ri = rt * RL + i;
    float mx = m_run[ri];
    FLASH_LOOP for (uint j = 0; j < G; ++j) mx = max(mx, red_s[(warp * LM + r) * G + j]);
    const float m_safe = mx == NEG_INF ? 0.0 : mx;  // a row that has seen nothing: all p = 0
    float sum = 0.0;
    const uint pb = warp * R * PS + (rt * LM + r) * PS;
    FLASH_LOOP for (uint c = g; c < BC; c += G) {
      const float x = s_s[sb + r * BC + c];
      const float16_t ph = float16_t(x == NEG_INF ? 0.0 : exp(x - m_safe));
      p_s[pb + c] = ph;
      sum += float(ph);  // the weights P·V uses, so that they sum to 1 after the division
    }
    const float alpha = m_run[ri] == NEG_INF ? 0.0 : exp(m_run[ri] - m_safe);
    l_run[ri] = l_run[ri] * alpha + sum;
    m_run[ri] = mx;
    // Only this lane reads or writes these columns of row r (c = g mod G).
    FLASH_LOOP for (uint c = g; c < LN; c += G) s_s[sb + r * BC + c] = alpha;
  }
}

// 1 / (row sum) across the first LN columns of row tile rt's rows of s_s (0 for empty rows),
// after the lanes' partial sums met in red_s.
void final_scale(uint warp, uint lane, uint rt) {
  const uint sb = warp * LM * BC, g = lane % G;
  FLASH_LOOP for (uint i = 0; i < RL; ++i) {
    const uint r = lane / G + i * ROW_STEP;
    float l = 0.0;
    FLASH_LOOP for (uint j = 0; j < G; ++j) l += red_s[(warp * LM + r) * G + j];
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    FLASH_LOOP for (uint c = g; c < LN; c += G) s_s[sb + r * BC + c] = inv;
  }
}

void main() {
  const uint group = flat_workgroup_id();
  if (group >= p.groups) return;  // uniform: the whole workgroup leaves
  const uint warp = coopmat_subgroup_id(), lane = coopmat_lane();
  bh = group / p.q_blocks;
  q0 = (p.q_blocks - 1 - group % p.q_blocks) * BR;  // the heaviest causal blocks first
  b = (p.bh_base + bh) / p.heads;
  h = (p.bh_base + bh) % p.heads;
  const uint rows = min(BR, p.sq - q0);
  keys = attention_keys(q0 + rows - 1);
  const uint blocks = (keys + BC - 1) / BC;
  // Grouped-query attention: a window starts at a multiple of `group` query heads.
  const uint kv = bh / p.group;
  const uint q_base = bh * p.sq * p.d, k_base = kv * p.sk * p.d, v_base = kv * p.sk * p.dv;

  FLASH_LOOP for (uint i = 0; i < ROW_TILES * RL; ++i) {
    m_run[i] = NEG_INF;
    l_run[i] = 0.0;
  }
  coopmat_acc acc[ROW_TILES * O_TILES];
  COOPMAT_UNROLL for (uint t = 0; t < ROW_TILES * O_TILES; ++t) coopmat_fill(acc[t], 0.0);

  // Q into registers, BC rows at a time through the staging buffer (BC is a multiple of LM, so
  // each row tile lies in one pass).
  coopmat_a qf[ROW_TILES * D_TILES];
  FLASH_LOOP for (uint r0 = 0; r0 < BR; r0 += BC) {
    FLASH_LOOP for (uint c = gl_LocalInvocationIndex; c < BC * D_CAP / 8; c += WG) {
      const uint r = c / (D_CAP / 8), col = (c % (D_CAP / 8)) * 8;
      kv_s[(r * KS + col) / 8] =
          r0 + r < BR ? load8(0, q_base, q0 + r0 + r, col, p.sq, p.d) : uvec4(0);
    }
    barrier();
    COOPMAT_UNROLL for (uint rt = 0; rt < ROW_TILES; ++rt) {
      const uint tr = (warp * ROW_TILES + rt) * LM;
      if (tr >= r0 && tr < r0 + BC)
        COOPMAT_UNROLL for (uint dt = 0; dt < D_TILES; ++dt)
          coopmat_load_packed(qf[rt * D_TILES + dt], kv_s, ((tr - r0) * KS + dt * LK) / 8, KS / 8,
                              COOPMAT_ROW_MAJOR);
    }
    barrier();  // the next pass, or the first K block, overwrites kv_s
  }

  if (blocks > 0) load_block(1, k_base, 0, p.d, D_CAP);
  FLASH_LOOP for (uint j = 0; j < blocks; ++j) {
    const uint c0 = j * BC;
    store_block(D_CAP, KS);  // K of block j
    barrier();
    load_block(2, v_base, c0, p.dv, DV_CAP);  // V of block j, while QKᵀ and the softmax run
    COOPMAT_UNROLL for (uint rt = 0; rt < ROW_TILES; ++rt) {
      // 1. S = Q Kᵀ: B (dim, key) is K's row `key` in kv_s, column-major.
      COOPMAT_UNROLL for (uint ct = 0; ct < S_TILES; ++ct) {
        coopmat_acc s;
        coopmat_fill(s, 0.0);
        COOPMAT_UNROLL for (uint dt = 0; dt < D_TILES; ++dt) {
          coopmat_b kf;
          coopmat_load_packed(kf, kv_s, (ct * LN * KS + dt * LK) / 8, KS / 8, COOPMAT_COL_MAJOR);
          coopmat_mul_add(s, qf[rt * D_TILES + dt], kf);
        }
        coopmat_store(s, s_s, warp * LM * BC + ct * LN, BC, COOPMAT_ROW_MAJOR);
      }
      coopmat_barrier();
      // 2. The online softmax of the tile's rows.
      softmax_max(warp, lane, rt, c0);
      coopmat_barrier();
      softmax_exp(warp, lane, rt);
      coopmat_barrier();
      // 3. acc *= alpha per row, through the rescale tile.
      coopmat_acc alpha;
      coopmat_load(alpha, s_s, warp * LM * BC, BC, COOPMAT_ROW_MAJOR);
      COOPMAT_UNROLL for (uint dt = 0; dt < O_TILES; ++dt)
        FLASH_LOOP for (uint e = 0; e < coopmat_length(alpha); ++e)
          coopmat_elem(acc[rt * O_TILES + dt], e) *= coopmat_elem(alpha, e);
      coopmat_barrier();  // s_s takes the next row tile's scores
    }
    barrier();  // every subgroup is done with K
    store_block(DV_CAP, VS);  // V of block j
    barrier();
    if (j + 1 < blocks) load_block(1, k_base, c0 + BC, p.d, D_CAP);  // during P·V
    // acc += P V: A (row, key) from p_s, B (key, dim) from V's rows in kv_s.
    COOPMAT_UNROLL for (uint kt = 0; kt < P_STEPS; ++kt) {
      coopmat_a pf[ROW_TILES];
      COOPMAT_UNROLL for (uint rt = 0; rt < ROW_TILES; ++rt)
        coopmat_load(pf[rt], p_s, warp * R * PS + rt * LM * PS + kt * LK, PS, COOPMAT_ROW_MAJOR);
      COOPMAT_UNROLL for (uint dt = 0; dt < O_TILES; ++dt) {
        coopmat_b vf;
        coopmat_load_packed(vf, kv_s, (kt * LK * VS + dt * LN) / 8, VS / 8, COOPMAT_ROW_MAJOR);
        COOPMAT_UNROLL for (uint rt = 0; rt < ROW_TILES; ++rt)
          coopmat_mul_add(acc[rt * O_TILES + dt], pf[rt], vf);
      }
    }
    barrier();  // V is consumed before the next K is stored
  }

  // out = acc / l, tile by tile through s_s, within bounds.
  const uint sb = warp * LM * BC;
  COOPMAT_UNROLL for (uint rt = 0; rt < ROW_TILES; ++rt) {
    FLASH_LOOP for (uint i = 0; i < RL; ++i)
      red_s[(warp * LM + lane / G + i * ROW_STEP) * G + lane % G] = l_run[rt * RL + i];
    coopmat_barrier();
    final_scale(warp, lane, rt);
    coopmat_barrier();
    coopmat_acc scale;
    coopmat_load(scale, s_s, sb, BC, COOPMAT_ROW_MAJOR);
    COOPMAT_UNROLL for (uint dt = 0; dt < O_TILES; ++dt)
      FLASH_LOOP for (uint e = 0; e < coopmat_length(scale); ++e)
        coopmat_elem(acc[rt * O_TILES + dt], e) *= coopmat_elem(scale, e);
    coopmat_barrier();
    COOPMAT_UNROLL for (uint dt = 0; dt < O_TILES; ++dt) {
      coopmat_store(acc[rt * O_TILES + dt], s_s, sb, LN, COOPMAT_ROW_MAJOR);
      coopmat_barrier();
      FLASH_LOOP for (uint e = lane; e < LM * LN; e += SG) {
        const uint row = q0 + (warp * ROW_TILES + rt) * LM + e / LN, col = dt * LN + e % LN;
        if (row < p.sq && col < p.dv) o[(bh * p.sq + row) * p.dv + col] = T(s_s[sb + e]);
      }
      coopmat_barrier();  // the next tile overwrites the scratch
    }
  }
}
