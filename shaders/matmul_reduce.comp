#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"
// The second half of a split-K matmul (matmul.comp compiled with SPLIT_K): out[z] =
// act(alpha * sum over s of part[z * splits + s] + bias), the partial sums in fp32. One
// invocation per output element; element i of the flat grid is (z, r) = (i / MN, i % MN), and
// the lowering spreads the grid over x and y (rows_grid) so that any size fits the grid limits.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HAS_BIAS = 0;
layout(constant_id = 2) const uint ACT = 0;  // 0 none, 1 relu, 2 gelu

layout(set = 0, binding = 0) readonly buffer Part { float part[]; };
layout(set = 0, binding = 1) readonly buffer Bias { T bias[]; };  // bound to part when HAS_BIAS = 0
layout(set = 0, binding = 2) writeonly buffer Out { T o[]; };
layout(push_constant) uniform Push {
  uint total;   // batch * M * N
  uint MN, N;
  uint splits;
  float alpha;
} p;

void main() {
  const uint i = flat_workgroup_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i >= p.total) return;
  const uint z = i / p.MN, r = i % p.MN;
  float s = 0.0;
  for (uint k = 0; k < p.splits; ++k) s += part[(z * p.splits + k) * p.MN + r];
  float add = HAS_BIAS != 0 ? float(bias[r % p.N]) : 0.0;
  o[i] = T(activate(p.alpha * s + add, ACT));
}
