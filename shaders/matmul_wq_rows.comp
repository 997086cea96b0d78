#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// The decoding step's mat-vec out = epilogue(x · Wᵀ) for one row x [K] and a quantized Linear
// weight W [N, K] (one W_<type> of quant_types.def), for CPU devices, with
// the subgroup's lanes reading consecutive blocks of W: a workgroup (one subgroup of SG lanes)
// takes ITER groups of R consecutive rows, and a group's R * KB blocks (KB = K / 32; the rows
// are contiguous) are dealt to the lanes in order, block p = i * SG + lane in round i < SLOTS.
// So each round reads SG consecutive blocks, one stream through memory per workgroup, where
// matmul_wq_vec.comp's lanes read SG rows apart (SG streams): the mat-vec waits on memory more
// than it computes (bench/RESULTS.md). R = SG / gcd(KB, SG) makes the rounds whole.
//
// Round i of every group puts the same block index b_i at a lane (only its row differs), so each
// lane keeps x's blocks b_i, i < SLOTS, in registers for all its groups (xc), and per block
// accumulates raw = Σ q_e · x_e over the quantized values q_e (wq_texel.glsl's load_block), then
// d · raw + m · Σ x_e, into its partial sum of the block's row; a group ends with one
// subgroupAdd per row. No shuffles and no fetches of x in the loop over W.
//
// Fusions, as matmul_wq_vec.comp: HAS_NORM (x RMS-normalized first, γ [K] at binding 5: x is
// cached as γ ∘ x and the sum of squares taken once per workgroup), GATED (W is [2N, K]: a group
// is R / 2 gate rows and the R / 2 up rows N below them, out = act(gate) · up), HAS_RESIDUAL
// (out += residual). Else out = act(alpha · acc + bias). fp32 accumulation whatever T is.

layout(local_size_x_id = 0) in;  // SG: one subgroup
layout(constant_id = 1) const uint KB = 18;  // 32-element blocks per row of W
layout(constant_id = 2) const uint R = 4;    // rows of W per group (gate and up rows when GATED)
layout(constant_id = 3) const uint ITER = 8; // groups per workgroup
layout(constant_id = 4) const uint HAS_BIAS = 0;
layout(constant_id = 5) const uint ACT = 0;  // see activations.glsl
layout(constant_id = 6) const uint GATED = 0;
layout(constant_id = 7) const uint HAS_RESIDUAL = 0;
layout(constant_id = 8) const uint HAS_NORM = 0;

const uint SG = gl_WorkGroupSize.x;
const uint SLOTS = (R * KB + SG - 1u) / SG;     // rounds per group
const uint RO = GATED != 0u ? R / 2u : R;        // outputs per group

layout(set = 0, binding = 0) uniform samplerBuffer A;
layout(set = 0, binding = 1) uniform usamplerBuffer W;
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // [N] ([2N] when GATED)
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 4) readonly buffer Residual { T residual[]; };
layout(set = 0, binding = 5) uniform samplerBuffer Gamma;  // HAS_NORM: γ [K]
// Optional bindings that are absent are bound to A (bias, residual) or A's texels (gamma) and
// never read.
#define MATMUL_PUSH_EPS 1
#define MATMUL_FUSIONS 1  // GATED, HAS_RESIDUAL above
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

#define WQ_BLOCKS 1u  // one block decoded at a time (wq_texel.glsl)
#include "wq_texel.glsl"

vec4 xc[SLOTS * 8u];               // x (γ ∘ x) of block b_i, as 8 texels per round i
float sum_lo[SLOTS], sum_hi[SLOTS];  // Σ x_e over its two halves
uint slot_row[SLOTS];              // the row of the group (< R) the lane's block of round i is in
uint slot_block[SLOTS];            // b_i
bool slot_live[SLOTS];             // the last round may deal fewer blocks than lanes
float acc[R];

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint N = p.N;

  [[unroll]] for (uint i = 0; i < SLOTS; ++i) {
    const uint pair = min(i * SG + lane, R * KB - 1u);
    slot_live[i] = i * SG + lane < R * KB;
    slot_row[i] = pair / KB;
    slot_block[i] = pair % KB;
    float lo = 0.0, hi = 0.0;
    [[unroll]] for (uint q = 0; q < 8u; ++q) {
      vec4 x = texelFetch(A, int(slot_block[i] * 8u + q));
      if (HAS_NORM != 0u) x *= texelFetch(Gamma, int(slot_block[i] * 8u + q));
      xc[i * 8u + q] = x;
      if (q < 4u) lo += x.x + x.y + x.z + x.w;
      else hi += x.x + x.y + x.z + x.w;
    }
    sum_lo[i] = lo;
    sum_hi[i] = hi;
  }
  float scale = p.alpha;
  if (HAS_NORM != 0u) {
    // The sum of squares of x itself, each block by one lane.
    float squares = 0.0;
    for (uint b = lane; b < KB; b += SG)
      [[unroll]] for (uint q = 0; q < 8u; ++q) {
        const vec4 x = texelFetch(A, int(b * 8u + q));
        squares += dot(x, x);
      }
    scale *= inversesqrt(subgroupAdd(squares) / float(KB * 32u) + p.eps);
  }

  const uint row_halfwords = row_hw(KB * 32u);
  const uint rows = GATED != 0u ? 2u * N : N;
  for (uint it = 0; it < ITER; ++it) {
    const uint first = (gl_WorkGroupID.x * ITER + it) * RO;  // the group's first output
    if (first >= N) break;  // uniform
    [[unroll]] for (uint r = 0; r < R; ++r) acc[r] = 0.0;
    [[unroll]] for (uint i = 0; i < SLOTS; ++i) {
      // The lane's block this round: row slot_row[i] of the group (its gate or up half).
      const uint r = slot_row[i];
      const uint n = GATED != 0u && r >= RO ? N + first + (r - RO) : first + r;
      load_block(0u, min(n, rows - 1u) * row_halfwords, slot_block[i]);
      float raw_lo = 0.0, raw_hi = 0.0;
      [[unroll]] for (uint e = 0; e < 32u; ++e) {
        const float x = xc[i * 8u + e / 4u][e % 4u];
        if (e < 16u) raw_lo += quant(0u, e) * x;
        else raw_hi += quant(0u, e) * x;
      }
      const float v = bd[0] * raw_lo + bm[0] * sum_lo[i] + bd[1] * raw_hi + bm[1] * sum_hi[i];
      [[unroll]] for (uint k = 0; k < R; ++k)
        if (slot_live[i] && r == k) acc[k] += v;
    }
    float total[R];
    [[unroll]] for (uint r = 0; r < R; ++r) total[r] = subgroupAdd(acc[r]) * scale;
    [[unroll]] for (uint r = 0; r < RO; ++r) {
      const uint n = first + r;
      if (lane != r % SG || n >= N) continue;
      float v = total[r] + (HAS_BIAS != 0u ? float(bias[n]) : 0.0);
      const float up = GATED != 0u ? total[RO + r] + (HAS_BIAS != 0u ? float(bias[N + n]) : 0.0) : 0.0;
      o[n] = T(matmul_epilogue(v, up, HAS_RESIDUAL != 0u ? float(residual[n]) : 0.0));
    }
  }
}
