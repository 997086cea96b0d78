#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "activations.glsl"
// The decoding step's mat-vec out = epilogue(x · Wᵀ) for one row x [K] and a quantized Linear
// weight W [N, K] (one of W_Q8_0, W_Q4_0, W_Q4_1, W_Q5_0, W_Q4_K, W_Q6_K), for CPU devices
// (matmul_wq_texel.comp's layout with one row: x and W through texel buffers, one subgroup per
// workgroup, lane l owning columns n0 + l + SG * j).
//
// Per 32-element block of K each lane fetches the raw words of its TN blocks of W (wq_texel.glsl)
// and accumulates raw = Σ q_e · x_e over the block's quantized values q_e, each half of the block
// (16 elements) apart; the block's scale d and offset m (q4_1's m, q4_0's -8d, ...) are applied
// once: acc += d · raw + m · Σ x_e. That is two float operations per weight where dequantizing
// first takes four (lavapipe emits no fused multiply-add). x's 32 values reach every lane by
// shuffles with constant indices, shared by the TN blocks.
//
// Fused, each optional (spec constants), so that a transformer block's mat-vecs need no
// neighbouring kernels:
//   HAS_NORM     x is first RMS-normalized: y = rsqrt(mean(x²) + eps) · W·(γ ∘ x), γ [K] bound at
//                5 (texels like x). Every workgroup sums x² itself (x is read anyway).
//   GATED        W is [2N, K], rows [0, N) the gate and [N, 2N) the up projection: out[n] =
//                act(gate[n]) · up[n] (SwiGLU with act = silu); a lane holds TN / 2 of each.
//   HAS_RESIDUAL out[n] += residual[n] after everything else (binding 4).
// Else out[n] = act(alpha · acc + bias[n]). fp32 accumulation whatever T is.

layout(local_size_x_id = 0) in;  // SG: one subgroup
layout(constant_id = 1) const uint TN = 4;  // rows of W per lane (gate and up rows when GATED)
layout(constant_id = 2) const uint HAS_BIAS = 0;
layout(constant_id = 3) const uint ACT = 0;  // see activations.glsl
layout(constant_id = 4) const uint GATED = 0;
layout(constant_id = 5) const uint HAS_RESIDUAL = 0;
layout(constant_id = 6) const uint HAS_NORM = 0;

const uint SG = gl_WorkGroupSize.x;
const uint NA = (8u + SG - 1u) / SG;  // x texels per block and lane
const uint TO = GATED != 0u ? TN / 2u : TN;  // output columns per lane

layout(set = 0, binding = 0) uniform samplerBuffer A;
layout(set = 0, binding = 1) uniform usamplerBuffer W;
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // [N] ([2N] when GATED)
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 4) readonly buffer Residual { T residual[]; };
layout(set = 0, binding = 5) uniform samplerBuffer Gamma;  // HAS_NORM: γ [K]
// Optional bindings that are absent are bound to A (bias, residual) or A's texels (gamma) and
// never read.
layout(push_constant) uniform Push {
  uint M, N, K;  // M = 1; N output columns
  uint batch1;
  uint a_stride0, a_stride1;
  uint b_stride0, b_stride1;
  uint y_base;
  uint z_base;
  float alpha;
  uint splits;
  uint k_split;
  uint ldo;
  float eps;  // HAS_NORM
} p;

#include "wq_texel.glsl"

// The raw words of each of the lane's TN blocks at the current block of K, and their scales:
// value = bd · q + bm, per half of the block (q6_k scales its halves apart).
#if defined(W_Q6_K)
#define QW 16u
#elif defined(W_Q8_0) || defined(W_Q4_K)
#define QW 8u
#elif defined(W_Q5_0)
#define QW 5u
#else
#define QW 4u
#endif
uint qw[TN * QW];
float bd[TN * 2], bm[TN * 2];

void set_scale(uint j, float d, float m) {
  bd[2 * j] = d;
  bd[2 * j + 1] = d;
  bm[2 * j] = m;
  bm[2 * j + 1] = m;
}

// Block b of row j of the lane (its first halfword is `row`).
void load_block(uint j, uint row, uint b) {
#if defined(W_Q4_K)
  const uint sb = (row + (b / 8u) * SUPER_HW) >> 3, s = b % 8u;
  const uvec4 header = texelFetch(W, int(sb));
  const vec2 dm = unpackHalf2x16(header.x);
  const uint s0 = header.y, s1 = header.z, s2 = header.w;
  // ggml's get_scale_min_k4 on the 12 scale bytes s0..s2, for sub-block s (uniform).
  uint sc, mn;
  if (s < 4u) {
    sc = (s0 >> (8u * s)) & 63u;
    mn = (s1 >> (8u * s)) & 63u;
  } else {
    const uint hi = (s2 >> (8u * (s - 4u))) & 0xffu;
    sc = (hi & 0xfu) | (((s0 >> (8u * (s - 4u))) >> 6 & 3u) << 4);
    mn = (hi >> 4) | (((s1 >> (8u * (s - 4u))) >> 6 & 3u) << 4);
  }
  set_scale(j, dm.x * float(sc), -(dm.y * float(mn)));
  const uvec4 q0 = texelFetch(W, int(sb + 1u + 2u * (s / 2u)));
  const uvec4 q1 = texelFetch(W, int(sb + 2u + 2u * (s / 2u)));
  const uint shift = 4u * (s & 1u);
  qw[j * QW + 0] = q0.x >> shift;
  qw[j * QW + 1] = q0.y >> shift;
  qw[j * QW + 2] = q0.z >> shift;
  qw[j * QW + 3] = q0.w >> shift;
  qw[j * QW + 4] = q1.x >> shift;
  qw[j * QW + 5] = q1.y >> shift;
  qw[j * QW + 6] = q1.z >> shift;
  qw[j * QW + 7] = q1.w >> shift;
#elif defined(W_Q6_K)
  const uint sb = row + (b / 8u) * SUPER_HW, s = b % 8u, h = s / 4u, r = s % 4u;
  const uint scales = fetch_half(sb + 96u + 4u * h + r);
  const float d = unpackHalf2x16(fetch_half(sb + 104u)).x;
  // ggml's order: (d * sc) * q.
  const float d0 = d * float(int(scales << 24) >> 24), d1 = d * float(int(scales << 16) >> 24);
  bd[2 * j] = d0;
  bd[2 * j + 1] = d1;
  bm[2 * j] = -32.0 * d0;
  bm[2 * j + 1] = -32.0 * d1;
  fetch_32_bytes(sb + 64u + 16u * h);
  [[unroll]] for (uint g = 0; g < 8u; ++g) qw[j * QW + 8u + g] = q8[g] >> (2u * r);
  fetch_32_bytes(sb + 32u * h + 16u * (r & 1u));
  [[unroll]] for (uint g = 0; g < 8u; ++g) qw[j * QW + g] = q8[g] >> (4u * (r / 2u));
#else
  const uint h = row + b * BLOCK_HW;
  fetch_words(h >> 1);
  const bool odd = (h & 1u) != 0u;
#if defined(W_Q5_0)
  // Halfwords 0..10 of the block: d, the 32 high bits, then 16 bytes of nibbles.
  uint hw[11];
  [[unroll]] for (uint i = 0; i < 11u; ++i)
    hw[i] = odd ? (fw[(i + 1u) >> 1] >> (((i + 1u) & 1u) << 4)) & 0xffffu
                : (fw[i >> 1] >> ((i & 1u) << 4)) & 0xffffu;
  const float d = unpackHalf2x16(hw[0]).x;
  set_scale(j, d, -16.0 * d);
  qw[j * QW] = hw[1] | (hw[2] << 16);
  [[unroll]] for (uint g = 0; g < 4u; ++g) qw[j * QW + 1u + g] = hw[3 + 2 * g] | (hw[4 + 2 * g] << 16);
#elif defined(W_Q4_1)
  const vec2 dm = unpackHalf2x16(fw[0]);
  set_scale(j, dm.x, dm.y);
  [[unroll]] for (uint g = 0; g < NQ; ++g) qw[j * QW + g] = fw[1 + g];
#else
  // The header is the halfword at h; the values start at h + 1, word aligned when h is odd.
  const float d = unpackHalf2x16(odd ? fw[0] >> 16 : fw[0]).x;
#if defined(W_Q4_0)
  set_scale(j, d, -8.0 * d);
#else
  set_scale(j, d, 0.0);
#endif
  [[unroll]] for (uint g = 0; g < NQ; ++g)
    qw[j * QW + g] = odd ? fw[1 + g] : (fw[g] >> 16) | (fw[g + 1] << 16);
#endif
#endif
}

// The quantized value q of element e (a constant after unrolling) of the lane's block j.
float quant(uint j, uint e) {
#if defined(W_Q8_0)
  return float(int(qw[j * QW + e / 4u] << (24u - 8u * (e % 4u))) >> 24);
#elif defined(W_Q4_K)
  return float((qw[j * QW + e / 4u] >> (8u * (e % 4u))) & 0xfu);
#elif defined(W_Q6_K)
  const uint low = (qw[j * QW + e / 4u] >> (8u * (e % 4u))) & 0xfu;
  const uint high = (qw[j * QW + 8u + e / 4u] >> (8u * (e % 4u))) & 3u;
  return float(low | (high << 4));
#else
  // Byte i of the 16 holds element i in its low nibble and element i + 16 in its high one.
  const uint nib = (qw[j * QW + (QW - 4u) + (e % 16u) / 4u] >> (8u * (e % 4u) + 4u * (e / 16u))) & 0xfu;
#if defined(W_Q5_0)
  return float(nib | (((qw[j * QW] >> e) & 1u) << 4));
#else
  return float(nib);
#endif
#endif
}

float acc[TN];
uint w_row[TN];

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint N = p.N, K = p.K, KB = K / 32u;
  const uint n0 = gl_WorkGroupID.x * SG * TO;

  // Lane l fetches texel t = r * SG + l of each block of x (quad t; lanes past the 8 quads
  // repeat the last one and leave it out of the sum of squares).
  uint a_quad[NA];
  [[unroll]] for (uint r = 0; r < NA; ++r) a_quad[r] = min(r * SG + lane, 7u);
  [[unroll]] for (uint j = 0; j < TO; ++j) {
    const uint n = min(n0 + lane + SG * j, N - 1u);
    w_row[j] = n * row_hw(K);
    if (GATED != 0u) w_row[TO + j] = (n + N) * row_hw(K);
  }
  [[unroll]] for (uint j = 0; j < TN; ++j) acc[j] = 0.0;
  float squares = 0.0;

  for (uint b = 0; b < KB; ++b) {
    vec4 av[NA];
    [[unroll]] for (uint r = 0; r < NA; ++r) {
      av[r] = texelFetch(A, int(b * 8u + a_quad[r]));
      if (HAS_NORM != 0u) {
        if (r * SG + lane < 8u) squares += dot(av[r], av[r]);
        av[r] *= texelFetch(Gamma, int(b * 8u + a_quad[r]));
      }
    }
    [[unroll]] for (uint j = 0; j < TN; ++j) load_block(j, w_row[j], b);
    float raw[TN * 2];
    [[unroll]] for (uint i = 0; i < TN * 2; ++i) raw[i] = 0.0;
    float sum_lo = 0.0, sum_hi = 0.0;
    [[unroll]] for (uint e = 0; e < 32u; ++e) {
      const uint quad = e / 4u;
      const float a = subgroupShuffle(av[quad / SG][e % 4u], quad % SG);
      if (e < 16u) sum_lo += a;
      else sum_hi += a;
      [[unroll]] for (uint j = 0; j < TN; ++j) raw[2 * j + e / 16u] += quant(j, e) * a;
    }
    [[unroll]] for (uint j = 0; j < TN; ++j)
      acc[j] += bd[2 * j] * raw[2 * j] + bm[2 * j] * sum_lo + bd[2 * j + 1] * raw[2 * j + 1] +
                bm[2 * j + 1] * sum_hi;
  }

  float scale = p.alpha;
  if (HAS_NORM != 0u) scale *= inversesqrt(subgroupAdd(squares) / float(K) + p.eps);
  [[unroll]] for (uint j = 0; j < TO; ++j) {
    const uint n = n0 + lane + SG * j;
    if (n >= N) continue;
    float v = scale * acc[j] + (HAS_BIAS != 0u ? float(bias[n]) : 0.0);
    if (GATED != 0u) {
      const float up = scale * acc[TO + j] + (HAS_BIAS != 0u ? float(bias[n + N]) : 0.0);
      v = activate(v, ACT) * up;
    } else {
      v = activate(v, ACT);
    }
    if (HAS_RESIDUAL != 0u) v += float(residual[n]);
    o[n] = T(v);
  }
}
