#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "activations.glsl"
// out = act(alpha * A·Wᵀ + bias) for a quantized Linear weight W [N, K] (ggml q8_0, q4_0, q4_1
// blocks; one of W_Q8_0, W_Q4_0, W_Q4_1), for CPU devices, shaped like matmul_texel.comp: there
// storage-buffer loads with per-lane addresses become lane loops, while texel fetches are
// gathers, so A is read as 4-element texels and W as R32_UINT texels (32-bit words of its
// blocks, which are only 2-byte aligned for q4_0 and q8_0).
//
// A workgroup is one subgroup of SG lanes and computes TM rows x (SG * TN) columns; lane l owns
// columns n0 + l + SG * j, j < TN. Per 32-element block of K each lane
//   - fetches the words of its TN blocks of W and dequantizes them in registers (fma(d, q, m),
//     within fp32 rounding of ggml's d * q + m), once for all TM rows;
//   - fetches its share of the TM x 8 texels of A (texel t = r * SG + lane is row t / 8, quad
//     t % 8) and takes every row's 32 values from the lanes holding them by shuffles with
//     constant indices (one permute each), as matmul_texel does.
// The decoding step (M = 1) is TM = 1: each block of W is then read exactly once.
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

// A block is BLOCK_HW halfwords; BW words starting at the one holding its first halfword cover
// it at either halfword parity. NQ words of quantized values follow the header.
#if defined(W_Q8_0)
#define BLOCK_HW 17u
#define BW 9u
#define NQ 8u
#elif defined(W_Q4_0)
#define BLOCK_HW 9u
#define BW 5u
#define NQ 4u
#elif defined(W_Q4_1)
#define BLOCK_HW 10u  // always word aligned: rows are whole words
#define BW 5u
#define NQ 4u
#else
#error "define one of W_Q8_0, W_Q4_0, W_Q4_1"
#endif

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

float acc[TM * TN];
uint a_idx[NA];  // texel of this lane's (row, quad) in block 0
uint w_row[TN];  // first halfword of this lane's row j
// The lane's TN blocks of W at the current block of K, dequantized. A global, not a parameter:
// passed as an `inout` array sized by specialization constants it read back as zeros on lavapipe.
float wq[TN * 32];

// Column j's block starting at halfword h, dequantized into wq[j * 32 .. j * 32 + 31].
void dequantize(uint j, uint h) {
  uint f[BW];
  [[unroll]] for (uint i = 0; i < BW; ++i) f[i] = texelFetch(W, int((h >> 1) + i)).x;
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
  [[unroll]] for (uint j = 0; j < TN; ++j) w_row[j] = min(n0 + lane + SG * j, N - 1) * KB * BLOCK_HW;
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;

  for (uint b = 0; b < KB; ++b) {
    // Fetches first (calls into the driver), then the arithmetic.
    vec4 av[NA];
    [[unroll]] for (uint r = 0; r < NA; ++r) av[r] = texelFetch(A, int(a_idx[r] + b * 8u));
    [[unroll]] for (uint j = 0; j < TN; ++j) dequantize(j, w_row[j] + b * BLOCK_HW);
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
