#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Bandwidth peak probe for `vkformer bench`: dst = src over n vec4s (16 bytes each), a
// grid-stride loop so any grid covers any size; the bench times a buffer much larger than the
// device's caches and counts 2 * 16 * n bytes (one read, one write) per run. Each invocation
// moves UNROLL vec4s per trip, strided by the whole grid, so loads are independent and
// neighbouring invocations touch neighbouring addresses (coalesced on GPUs, SIMD-contiguous on
// CPUs).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint UNROLL = 4;  // 1..8

layout(set = 0, binding = 0) readonly buffer Src { vec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { vec4 dst[]; };
layout(push_constant) uniform Push {
  uint n;  // vec4s to copy
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint i = gl_GlobalInvocationID.x;
  for (; i + (UNROLL - 1) * stride < p.n; i += UNROLL * stride) {
    vec4 v[8];
    for (uint u = 0; u < UNROLL; ++u) v[u] = src[i + u * stride];
    for (uint u = 0; u < UNROLL; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < p.n; i += stride) dst[i] = src[i];
}
