#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
// out[z] = act(alpha * A[z]·B[z] + bias) (+ residual) on cooperative matrices
// (shaders/coopmat.glsl): f16 A and B, fp32 accumulators, f16 storage only. One source, three
// kernels: matmul_coopmat_khr (VK_KHR_cooperative_matrix), matmul_coopmat_nv
// (VK_NV_cooperative_matrix, where KHR is absent) and matmul_coopmat_emu (the emulation, which the
// tests run on lavapipe in every configuration the tuning may choose: src/kernels/tuning_matmul.cpp,
// coopmat_configs()). With WEIGHTS defined (and one W_<type> of weights.glsl: the kernels
// matmul_wq_coopmat_{khr,nv,emu}_<type>), B is a Linear weight [N, K] (TRANSPOSE_B) in a weight
// dtype — bf16 or ggml blocks, K whole blocks — read in its own layout: each 8-element chunk of
// the B stage is dequantized (weights.glsl's block_values, ggml's arithmetic) in registers and
// staged as f16 like a chunk of an f16 B, so prompt processing runs its MMAs on quantized weights.
//
// Tiling. A workgroup of WARPS_M x WARPS_N subgroups (SG invocations each) computes a BM x BN
// tile of out, BM = LM * TILES_M * WARPS_M, BN = LN * TILES_N * WARPS_N, where LM x LN x LK is
// the MMA shape (src/vk/coopmat.cpp); subgroup (wm, wn) owns TILES_M x TILES_N
// accumulator tiles. K goes in slices of BK = LK * BK_TILES, staged in shared memory as f16 (A
// as BM rows of BK, B as BK rows of BN, or BN rows of BK with TRANSPOSE_B), each row padded by 8
// halves (16 bytes) so that the rows of a fragment start in different banks; 8 halves travel as
// one uvec4, so stages are written with 16-byte stores. Two stages: while the subgroups multiply
// slice s from one, the invocations hold slice s + 1 in registers (loaded before the products,
// stored after them), so global latency overlaps the MMAs and one barrier per slice suffices.
// Global loads move 8 halves at a time: one 16-byte load where the rows allow it (VEC8: K, and N
// without TRANSPOSE_B, multiples of 8), else 8 scalar loads. Elements outside the matrices are
// staged as zeros, so any M, N, K >= 1 works.
//
// Epilogue: alpha scales every accumulator element in registers; then each tile goes through the
// subgroup's fp32 scratch in shared memory, from which its invocations add the bias, apply the
// activation, add the residual (HAS_RESIDUAL: out's shape and row stride) and store the f16
// results within bounds (row stride ldo).
// Batch, y_base and z_base as in matmul.comp.

layout(local_size_x_id = 0) in;  // SG * WARPS_M * WARPS_N
layout(constant_id = 1) const uint SG = 32;  // invocations per subgroup
layout(constant_id = 2) const uint LM = 16;
layout(constant_id = 3) const uint LN = 16;
layout(constant_id = 4) const uint LK = 16;
layout(constant_id = 5) const uint WARPS_M = 2;
layout(constant_id = 6) const uint WARPS_N = 2;
layout(constant_id = 7) const uint TILES_M = 2;
layout(constant_id = 8) const uint TILES_N = 2;
layout(constant_id = 9) const uint BK_TILES = 2;
layout(constant_id = 10) const uint TRANSPOSE_B = 0;
layout(constant_id = 11) const uint HAS_BIAS = 0;
layout(constant_id = 12) const uint ACT = 0;  // see activations.glsl
layout(constant_id = 13) const uint VEC8 = 0;
layout(constant_id = 14) const uint HAS_RESIDUAL = 0;
const uint GATED = 0u;

#define COOPMAT_M LM
#define COOPMAT_N LN
#define COOPMAT_K LK
#define COOPMAT_SUBGROUP_SIZE SG
#define COOPMAT_SUBGROUPS (WARPS_M * WARPS_N)
#include "coopmat.glsl"

const uint WG = SG * WARPS_M * WARPS_N;
const uint BM = LM * TILES_M * WARPS_M;
const uint BN = LN * TILES_N * WARPS_N;
const uint BK = LK * BK_TILES;
const uint PAD = 8;                                      // halves
const uint AS = BK + PAD;                                // A stage: As[m * AS + k]
const uint BS = TRANSPOSE_B != 0 ? BK + PAD : BN + PAD;  // Bs[n * BS + k] or Bs[k * BS + n]
const uint B_ROWS = TRANSPOSE_B != 0 ? BN : BK;
const uint B_COLS = TRANSPOSE_B != 0 ? BK : BN;
// Stages in uvec4 of 8 halves (all row lengths and offsets are multiples of 8 halves).
const uint A_STAGE = BM * AS / 8;
const uint B_STAGE = B_ROWS * BS / 8;
// 8-half chunks per slice, and per invocation.
const uint A_CHUNKS = BM * BK / 8;
const uint B_CHUNKS = B_ROWS * B_COLS / 8;
const uint A_PER = (A_CHUNKS + WG - 1) / WG;
const uint B_PER = (B_CHUNKS + WG - 1) / WG;

layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 0) readonly buffer A8 { uvec4 a8[]; };  // the same buffer, for VEC8
#ifdef WEIGHTS
layout(set = 0, binding = 1) readonly buffer W { uint w[]; };  // weights.glsl's view
#else
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 1) readonly buffer B8 { uvec4 b8[]; };
#endif
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // bound to A when HAS_BIAS = 0
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 4) readonly buffer Residual { T residual[]; };  // bound to A when absent
#define MATMUL_FUSIONS 1  // HAS_RESIDUAL and GATED (always 0) above
#include "matmul_base.glsl"  // the push block p and matmul_epilogue
#ifdef WEIGHTS
#include "weights.glsl"
#define B_ELEM(e) a[e]  // never read: B comes from load_w8
#define B_VEC8(e) a8[e]
#else
#define B_ELEM(e) b[e]
#define B_VEC8(e) b8[e]
#endif

shared uvec4 As[2 * A_STAGE];
shared uvec4 Bs[2 * B_STAGE];
shared float Cs[WARPS_M * WARPS_N * LM * LN];

// The next slice, between its global loads and its shared stores: 8 halves per uvec4.
uvec4 ra[A_PER];
uvec4 rb[B_PER];

uint m0, n0, a_off, b_off;

// 8 halves of row `row` from column `col` of a row-major matrix with `rows` x `cols` elements at
// `base` in a (which_b = false) or b; zeros outside it.
uvec4 load8(bool which_b, uint base, uint row, uint col, uint rows, uint cols) {
  if (row >= rows || col >= cols) return uvec4(0);
  const uint e = base + row * cols + col;
  if (VEC8 != 0) return which_b ? B_VEC8(e / 8) : a8[e / 8];  // cols % 8 == 0: all 8 are inside
  float16_t h[8];
  COOPMAT_UNROLL for (uint j = 0; j < 8; ++j)
    h[j] = col + j < cols ? float16_t(which_b ? B_ELEM(e + j) : a[e + j]) : float16_t(0.0);
  return uvec4(packFloat2x16(f16vec2(h[0], h[1])), packFloat2x16(f16vec2(h[2], h[3])),
               packFloat2x16(f16vec2(h[4], h[5])), packFloat2x16(f16vec2(h[6], h[7])));
}

#ifdef WEIGHTS
// Elements k .. k + 7 of weight row n (k a multiple of 8), dequantized, as 8 halves; zeros
// outside the weight. A quantized row is whole 32-element blocks, so the 8 lie in one block.
uvec4 load_w8(uint n, uint k) {
  if (n >= p.N || k >= p.K) return uvec4(0);
  const uint row = n * row_halfwords(p.K);
#ifdef W_QUANTIZED
  const uint blk = k / 32u, g = (k % 32u) / 4u;
  const vec4 lo = block_values(row, blk, g), hi = block_values(row, blk, g + 1u);
#else
  vec4 lo, hi;
  COOPMAT_UNROLL for (uint j = 0; j < 4u; ++j) {
    lo[j] = k + j < p.K ? weight_at(row, k + j) : 0.0;
    hi[j] = k + 4u + j < p.K ? weight_at(row, k + 4u + j) : 0.0;
  }
#endif
  return uvec4(packFloat2x16(f16vec2(lo.xy)), packFloat2x16(f16vec2(lo.zw)),
               packFloat2x16(f16vec2(hi.xy)), packFloat2x16(f16vec2(hi.zw)));
}
#endif

void load_slice(uint k0) {
  const uint lid = gl_LocalInvocationIndex;
  COOPMAT_UNROLL for (uint t = 0; t < A_PER; ++t) {
    const uint c = lid + t * WG, r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
    if (c < A_CHUNKS) ra[t] = load8(false, a_off, m0 + r, k0 + kc, p.M, p.K);
  }
  COOPMAT_UNROLL for (uint t = 0; t < B_PER; ++t) {
    const uint c = lid + t * WG, r = c / (B_COLS / 8), cc = (c % (B_COLS / 8)) * 8;
    if (c >= B_CHUNKS) continue;
#ifdef WEIGHTS
    rb[t] = load_w8(n0 + r, k0 + cc);  // TRANSPOSE_B: row n, columns k
#else
    if (TRANSPOSE_B != 0)
      rb[t] = load8(true, b_off, n0 + r, k0 + cc, p.N, p.K);  // row n, columns k
    else
      rb[t] = load8(true, b_off, k0 + r, n0 + cc, p.K, p.N);  // row k, columns n
#endif
  }
}

void store_slice(uint stage) {
  const uint lid = gl_LocalInvocationIndex;
  COOPMAT_UNROLL for (uint t = 0; t < A_PER; ++t) {
    const uint c = lid + t * WG, r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
    if (c >= A_CHUNKS) continue;
    As[stage * A_STAGE + (r * AS + kc) / 8] = ra[t];
  }
  COOPMAT_UNROLL for (uint t = 0; t < B_PER; ++t) {
    const uint c = lid + t * WG, r = c / (B_COLS / 8), cc = (c % (B_COLS / 8)) * 8;
    if (c >= B_CHUNKS) continue;
    Bs[stage * B_STAGE + (r * BS + cc) / 8] = rb[t];
  }
}

void main() {
  const uint warp = coopmat_subgroup_id(), lane = coopmat_lane();
  const uint wm = warp / WARPS_N, wn = warp % WARPS_N;
  m0 = (p.y_base + gl_WorkGroupID.y) * BM;
  n0 = gl_WorkGroupID.x * BN;
  const uint z = p.z_base + gl_WorkGroupID.z;
  const uint z0 = z / p.batch1, z1 = z % p.batch1;
  a_off = z0 * p.a_stride0 + z1 * p.a_stride1;
  b_off = z0 * p.b_stride0 + z1 * p.b_stride1;

  coopmat_acc acc[TILES_M * TILES_N];
  COOPMAT_UNROLL for (uint t = 0; t < TILES_M * TILES_N; ++t) coopmat_fill(acc[t], 0.0);

  const uint slices = (p.K + BK - 1) / BK;
  load_slice(0);
  store_slice(0);
  barrier();
  for (uint s = 0; s < slices; ++s) {
    const uint stage = s & 1;
    if (s + 1 < slices) load_slice((s + 1) * BK);
    COOPMAT_UNROLL for (uint kt = 0; kt < BK_TILES; ++kt) {
      coopmat_a fa[TILES_M];
      coopmat_b fb[TILES_N];
      COOPMAT_UNROLL for (uint i = 0; i < TILES_M; ++i)
        coopmat_load_packed(fa[i], As,
                            stage * A_STAGE + ((wm * TILES_M + i) * LM * AS + kt * LK) / 8,
                            AS / 8, COOPMAT_ROW_MAJOR);
      COOPMAT_UNROLL for (uint j = 0; j < TILES_N; ++j) {
        const uint n = (wn * TILES_N + j) * LN;
        if (TRANSPOSE_B != 0)  // B (k, n) at n * BS + k: column-major
          coopmat_load_packed(fb[j], Bs, stage * B_STAGE + (n * BS + kt * LK) / 8, BS / 8,
                              COOPMAT_COL_MAJOR);
        else
          coopmat_load_packed(fb[j], Bs, stage * B_STAGE + (kt * LK * BS + n) / 8, BS / 8,
                              COOPMAT_ROW_MAJOR);
      }
      COOPMAT_UNROLL for (uint i = 0; i < TILES_M; ++i)
        COOPMAT_UNROLL for (uint j = 0; j < TILES_N; ++j)
          coopmat_mul_add(acc[i * TILES_N + j], fa[i], fb[j]);
    }
    // The other stage's readers finished before the previous barrier.
    if (s + 1 < slices) store_slice(stage ^ 1);
    barrier();
  }

  const uint c_off = warp * LM * LN;
  const uint o_off = z * p.M * p.ldo;
  COOPMAT_UNROLL for (uint i = 0; i < TILES_M; ++i)
    COOPMAT_UNROLL for (uint j = 0; j < TILES_N; ++j) {
      const uint t = i * TILES_N + j;
      for (uint e = 0; e < coopmat_length(acc[t]); ++e) coopmat_elem(acc[t], e) *= p.alpha;
      coopmat_store(acc[t], Cs, c_off, LN, COOPMAT_ROW_MAJOR);
      coopmat_barrier();
      const uint tm0 = m0 + (wm * TILES_M + i) * LM, tn0 = n0 + (wn * TILES_N + j) * LN;
      for (uint e = lane; e < LM * LN; e += SG) {
        const uint m = tm0 + e / LN, n = tn0 + e % LN;
        if (m >= p.M || n >= p.N) continue;
        const float add = HAS_BIAS != 0 ? float(bias[n]) : 0.0;
        const float res = HAS_RESIDUAL != 0 ? float(residual[o_off + m * p.ldo + n]) : 0.0;
        o[o_off + m * p.ldo + n] = T(matmul_epilogue(Cs[c_off + e] + add, 0.0, res));
      }
      coopmat_barrier();  // the next tile overwrites the scratch
    }
}
