#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// B [..., K, N] -> Bt [..., N, K] ahead of the texel matmul kernel (matmul_texel.comp), which
// runs faster with B transposed: each lane then reads its own column's K contiguously, where the
// untransposed layout sends every fetch to another row (K rows N * 4 bytes apart, which also
// collide in the caches when N is a power of 2). One invocation moves a 4 x 4 block: four texel
// fetches of rows 4 * k4 .. + 3 at column texel n4 (neighbouring invocations read neighbouring
// texels), transposed in registers, four 4-element stores. K and N are multiples of 4.

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) uniform samplerBuffer B;  // 4-element texels of B
layout(set = 0, binding = 1) writeonly buffer Out { T4 o4[]; };
layout(push_constant) uniform Push {
  uint K4, N4;  // K / 4, N / 4
  uint blocks;  // matrices * K4 * N4
} p;

void main() {
  const uint i = flat_workgroup_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i >= p.blocks) return;
  const uint per_matrix = p.K4 * p.N4;
  const uint z = i / per_matrix, r = i % per_matrix;
  const uint k4 = r / p.N4, n4 = r % p.N4;
  const uint base = z * per_matrix * 4;  // texels per matrix: K * N4
  vec4 v0 = texelFetch(B, int(base + (4 * k4 + 0) * p.N4 + n4));
  vec4 v1 = texelFetch(B, int(base + (4 * k4 + 1) * p.N4 + n4));
  vec4 v2 = texelFetch(B, int(base + (4 * k4 + 2) * p.N4 + n4));
  vec4 v3 = texelFetch(B, int(base + (4 * k4 + 3) * p.N4 + n4));
  for (uint q = 0; q < 4; ++q)
    o4[base + (4 * n4 + q) * p.K4 + k4] = T4(vec4(v0[q], v1[q], v2[q], v3[q]));
}
