#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "activations.glsl"
// out = act(alpha * A·Wᵀ + bias) for a quantized Linear weight W [N, K] (ggml blocks: one of
// W_Q8_0, W_Q4_0, W_Q4_1, W_Q5_0, W_Q4_K, W_Q6_K), for CPU devices, shaped like
// matmul_texel.comp: there storage-buffer loads with per-lane addresses become lane loops, while
// texel fetches are vector loads, so A is read as 4-element texels and W as 16-byte texels of
// its raw bytes (wq_texel.glsl). The decoding step (M = 1) takes matmul_wq_vec.comp instead.
//
// A workgroup is one subgroup of SG lanes and computes TM rows x (SG * TN) columns; lane l owns
// columns n0 + l + SG * j, j < TN. Per 32-element block of K each lane
//   - fetches the words of its TN blocks of W and dequantizes them in registers (fma(d, q, m),
//     within fp32 rounding of ggml's d * q + m), once for all TM rows;
//   - fetches its share of the TM x 8 texels of A (texel t = r * SG + lane is row t / 8, quad
//     t % 8) and takes every row's 32 values from the lanes holding them by shuffles with
//     constant indices (one permute each), as matmul_texel does.
// All loops over registers are unrolled so no array is indexed dynamically (lavapipe would keep
// it in memory). Rows past M and columns past N are clamped for loading and not stored. fp32
// accumulation whatever T is.

layout(local_size_x_id = 0) in;  // SG: one subgroup
layout(constant_id = 1) const uint TM = 16;  // rows per workgroup
layout(constant_id = 2) const uint TN = 2;   // columns per lane
layout(constant_id = 3) const uint HAS_BIAS = 0;
layout(constant_id = 4) const uint ACT = 0;  // see activations.glsl

const uint SG = gl_WorkGroupSize.x;
const uint NA = (TM * 8 + SG - 1) / SG;  // A fetches per block and lane

layout(set = 0, binding = 0) uniform samplerBuffer A;
layout(set = 0, binding = 1) uniform usamplerBuffer W;
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // bound to A when HAS_BIAS = 0
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(push_constant) uniform Push {  // matmul.comp's block
  uint M, N, K;
  uint batch1;
  uint a_stride0, a_stride1;
  uint b_stride0, b_stride1;
  uint y_base;
  uint z_base;
  float alpha;
  uint splits;
  uint k_split;
  uint ldo;
} p;

#include "wq_texel.glsl"

float acc[TM * TN];
uint a_idx[NA];  // texel of this lane's (row, quad) in block 0
uint w_row[TN];  // first halfword of this lane's row j
// The lane's TN blocks of W at the current block of K, dequantized. A global, not a parameter:
// passed as an `inout` array sized by specialization constants it read back as zeros on lavapipe.
float wq[TN * 32];

// Block b of column j's row (starting at halfword `row`), dequantized into wq[j * 32 .. + 31].
void dequantize(uint j, uint row, uint b) {
#if defined(W_Q4_K)
  // Super-blocks are 9 whole texels: the header, then 8 of nibbles.
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
  const float d = dm.x * float(sc), m = -(dm.y * float(mn));
  const uvec4 q0 = texelFetch(W, int(sb + 1u + 2u * (s / 2u))), q1 = texelFetch(W, int(sb + 2u + 2u * (s / 2u)));
  const uint q[8] = uint[8](q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w);
  const uint shift = 4u * (s & 1u);
  [[unroll]] for (uint e = 0; e < 32u; ++e)
    wq[j * 32 + e] = fma(d, float((q[e / 4] >> (8 * (e % 4) + shift)) & 0xfu), m);
#elif defined(W_Q6_K)
  const uint sb = row + (b / 8u) * SUPER_HW, s = b % 8u, h = s / 4u, r = s % 4u;
  const uint scales = fetch_half(sb + 96u + 4u * h + r);
  const float d = unpackHalf2x16(fetch_half(sb + 104u)).x;
  // ggml's order: (d * sc) * q, so the values equal its dequantization.
  const float d0 = d * float(int(scales << 24) >> 24), d1 = d * float(int(scales << 16) >> 24);
  fetch_32_bytes(sb + 64u + 16u * h);
  uint high[8];
  [[unroll]] for (uint g = 0; g < 8u; ++g) high[g] = q8[g] >> (2u * r);
  fetch_32_bytes(sb + 32u * h + 16u * (r & 1u));
  const uint shift = 4u * (r / 2u);
  [[unroll]] for (uint e = 0; e < 32u; ++e) {
    const uint low = (q8[e / 4] >> (8 * (e % 4) + shift)) & 0xfu;
    const uint hi2 = (high[e / 4] >> (8 * (e % 4))) & 3u;
    wq[j * 32 + e] = (e < 16u ? d0 : d1) * float(int(low | (hi2 << 4)) - 32);
  }
#else
  const uint h = row + b * BLOCK_HW;
  fetch_words(h >> 1);
  uint f[BW];
  [[unroll]] for (uint i = 0; i < BW; ++i) f[i] = fw[i];
#if defined(W_Q5_0)
  // Halfwords 0..10 of the block: d, the 32 high bits, then 16 bytes of nibbles.
  const bool odd = (h & 1u) != 0u;
  uint hw[11];
  [[unroll]] for (uint i = 0; i < 11u; ++i)
    hw[i] = odd ? (f[(i + 1u) >> 1] >> (((i + 1u) & 1u) << 4)) & 0xffffu
                : (f[i >> 1] >> ((i & 1u) << 4)) & 0xffffu;
  const float d = unpackHalf2x16(hw[0]).x;
  const uint qh = hw[1] | (hw[2] << 16);
  [[unroll]] for (uint e = 0; e < 32u; ++e) {
    const uint byte = (hw[3 + (e % 16) / 2] >> (8 * (e % 2))) & 0xffu;
    const uint q = ((byte >> (4 * (e / 16))) & 0xfu) | (((qh >> e) & 1u) << 4);
    wq[j * 32 + e] = d * float(int(q) - 16);
  }
#else
#if defined(W_Q4_1)
  const vec2 dm = unpackHalf2x16(f[0]);
  const float d = dm.x, m = dm.y;
  uint q[NQ];
  [[unroll]] for (uint g = 0; g < NQ; ++g) q[g] = f[1 + g];
#else
  // The header is the halfword at h; the values start at h + 1, word aligned when h is odd.
  const bool odd = (h & 1u) != 0u;
  const float d = unpackHalf2x16(odd ? f[0] >> 16 : f[0]).x;
  uint q[NQ];
  [[unroll]] for (uint g = 0; g < NQ; ++g) q[g] = odd ? f[1 + g] : (f[g] >> 16) | (f[g + 1] << 16);
#endif
#if defined(W_Q8_0)
  [[unroll]] for (uint e = 0; e < 32u; ++e)
    wq[j * 32 + e] = d * float(int(q[e / 4] << (24 - 8 * (e % 4))) >> 24);
#else
#if defined(W_Q4_0)
  const float m = -8.0 * d;
#endif
  // Byte b of the 16 holds element b in its low nibble and element b + 16 in its high one.
  [[unroll]] for (uint e = 0; e < 32u; ++e)
    wq[j * 32 + e] = fma(d, float((q[(e % 16) / 4] >> (8 * (e % 4) + 4 * (e / 16))) & 0xfu), m);
#endif
#endif
#endif
}

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint M = p.M, N = p.N, K = p.K, KB = K / 32u, K4 = K / 4u;
  const uint m0 = (p.y_base + gl_WorkGroupID.y) * TM;
  const uint n0 = gl_WorkGroupID.x * SG * TN;

  [[unroll]] for (uint r = 0; r < NA; ++r) {
    const uint t = min(r * SG + lane, TM * 8 - 1);
    a_idx[r] = min(m0 + t / 8, M - 1) * K4 + t % 8;
  }
  [[unroll]] for (uint j = 0; j < TN; ++j) w_row[j] = min(n0 + lane + SG * j, N - 1) * row_hw(K);
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;

  for (uint b = 0; b < KB; ++b) {
    // Fetches first (calls into the driver), then the arithmetic.
    vec4 av[NA];
    [[unroll]] for (uint r = 0; r < NA; ++r) av[r] = texelFetch(A, int(a_idx[r] + b * 8u));
    [[unroll]] for (uint j = 0; j < TN; ++j) dequantize(j, w_row[j], b);
    [[unroll]] for (uint i = 0; i < TM; ++i)
      [[unroll]] for (uint g = 0; g < 8u; ++g)
        [[unroll]] for (uint c = 0; c < 4u; ++c) {
          const float a = subgroupShuffle(av[(i * 8 + g) / SG][c], (i * 8 + g) % SG);
          [[unroll]] for (uint j = 0; j < TN; ++j)
            acc[i * TN + j] = fma(a, wq[j * 32 + g * 4 + c], acc[i * TN + j]);
        }
  }

  [[unroll]] for (uint j = 0; j < TN; ++j) {
    const uint n = n0 + lane + SG * j;
    if (n >= N) continue;
    const float add = HAS_BIAS != 0 ? float(bias[n]) : 0.0;
    [[unroll]] for (uint i = 0; i < TM; ++i) {
      const uint m = m0 + i;
      if (m < M) o[m * p.ldo + n] = T(activate(p.alpha * acc[i * TN + j] + add, ACT));
    }
  }
}
