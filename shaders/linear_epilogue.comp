#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"
// What a linear's fused epilogue does when its kernel cannot (the fallback of
// src/ops/matmul_fused.cpp), on the product t [rows, C] computed without it:
//   GATED = 1: t holds the gate then the up projection in each row (C = 2N):
//              out[r, n] = act(t[r, n]) * t[r, N + n]  (SwiGLU with act = silu);
//   GATED = 0: out[r, n] = t[r, n]  (C = N; the product already applied act);
// then + residual[r, n] when HAS_RESIDUAL (binding 1, else bound to t and not read). fp32
// arithmetic, a grid-stride loop over out's elements.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint GATED = 0;
layout(constant_id = 2) const uint ACT = 0;  // see activations.glsl
layout(constant_id = 3) const uint HAS_RESIDUAL = 0;

layout(set = 0, binding = 0) readonly buffer Product { T t[]; };
layout(set = 0, binding = 1) readonly buffer Residual { T residual[]; };
layout(set = 0, binding = 2) writeonly buffer Out { T o[]; };
layout(push_constant) uniform Push {
  uint total;  // rows * N
  uint n;      // N
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.total; i += stride) {
    float v;
    if (GATED != 0u) {
      const uint r = i / p.n, c = i - r * p.n;
      v = activate(float(t[r * 2u * p.n + c]), ACT) * float(t[r * 2u * p.n + p.n + c]);
    } else {
      v = float(t[i]);
    }
    if (HAS_RESIDUAL != 0u) v += float(residual[i]);
    o[i] = T(v);
  }
}
