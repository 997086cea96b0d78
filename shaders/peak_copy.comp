#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Bandwidth peak probe for `vkformer bench`: dst = src over n vec4s (16 bytes each); the bench
// times a buffer much larger than the device's caches and counts 2 * 16 * n bytes (one read, one
// write) per run. Two layouts, so that both kinds of device find their best:
// - strided (GPUs): a grid-stride loop, each invocation moving UNROLL vec4s per trip strided by
//   the whole grid, so loads are independent and neighbouring invocations touch neighbouring
//   addresses (coalesced);
// - BLOCKED (CPUs, where a workgroup is one thread): each workgroup moves one contiguous span
//   (UNROLL is unused), so one thread streams through one region at a time (lavapipe: 14-15 GB/s
//   where the strided layout reaches 12).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint UNROLL = 4;  // 1..8
layout(constant_id = 2) const bool BLOCKED = false;

#ifdef TEXEL
// CPU devices read a texel buffer faster than a storage buffer (a gather instead of a bounds
// check per lane; lavapipe: 14 vs 11 GB/s): the probe measures both and keeps the best, since
// vkformer's memory-bound kernels read through texels there.
layout(set = 0, binding = 0) uniform samplerBuffer src4;
vec4 src_at(uint i) { return texelFetch(src4, int(i)); }
#else
layout(set = 0, binding = 0) readonly buffer Src { vec4 src[]; };
vec4 src_at(uint i) { return src[i]; }
#endif
layout(set = 0, binding = 1) writeonly buffer Dst { vec4 dst[]; };
layout(push_constant) uniform Push {
  uint n;  // vec4s to copy
} p;

void main() {
  if (BLOCKED) {
    // Workgroup g copies [g * span, (g + 1) * span), its lanes side by side.
    const uint wg = gl_WorkGroupSize.x;
    const uint span = (p.n + gl_NumWorkGroups.x * wg - 1) / (gl_NumWorkGroups.x * wg) * wg;
    const uint end = min(p.n, (gl_WorkGroupID.x + 1) * span);
    for (uint i = gl_WorkGroupID.x * span + gl_LocalInvocationID.x; i < end; i += wg)
      dst[i] = src_at(i);
    return;
  }
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint i = gl_GlobalInvocationID.x;
  for (; i + (UNROLL - 1) * stride < p.n; i += UNROLL * stride) {
    vec4 v[8];
    for (uint u = 0; u < UNROLL; ++u) v[u] = src_at(i + u * stride);
    for (uint u = 0; u < UNROLL; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < p.n; i += stride) dst[i] = src_at(i);
}
