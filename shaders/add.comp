#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"
// out = a OP b with numpy broadcasting; OP (a specialization constant) is + (0), * (1) or
// silu(a) * b (2, the SwiGLU gate), all in fp32. Shapes are padded to rank 4; a broadcast
// dimension has stride 0, so out index i maps to a[sum(coord_d * a_stride_d)] and likewise for
// b. MODE skips that index arithmetic for the common cases: 1 same shapes (residuals), 2 b is
// one row of length dims[3] repeated (biases); a is then the full-shape operand (the lowering
// swaps operands only for the commutative + and *).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MODE = 0;
layout(constant_id = 2) const uint OP = 0;

#ifdef VEC4
// Modes 1 and 2 only, four elements per invocation: n and dims[3] count vec4s.
layout(set = 0, binding = 0) readonly buffer A { T4 a[]; };
layout(set = 0, binding = 1) readonly buffer B { T4 b[]; };
layout(set = 0, binding = 2) writeonly buffer Out { T4 o[]; };
#define ELEM T4
#define LOAD(v) vec4(v)
vec4 combine(vec4 x, vec4 y) {
  if (OP == 1u) return x * y;
  if (OP == 2u) return vec4(silu(x.x), silu(x.y), silu(x.z), silu(x.w)) * y;
  return x + y;
}
#else
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 2) writeonly buffer Out { T o[]; };
#define ELEM T
#define LOAD(v) float(v)
#endif
float combine(float x, float y) {
  if (OP == 1u) return x * y;
  if (OP == 2u) return silu(x) * y;
  return x + y;
}
layout(push_constant) uniform Push {
  uint n;
  uint dims[4];
  uint a_stride[4];
  uint b_stride[4];
} p;

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (MODE == 1u) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) o[i] = ELEM(combine(LOAD(a[i]), LOAD(b[i])));
    return;
  }
  if (MODE == 2u) {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
      o[i] = ELEM(combine(LOAD(a[i]), LOAD(b[i % p.dims[3]])));
    return;
  }
#ifndef VEC4
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    uint rest = i, ia = 0, ib = 0;
    for (int d = 3; d >= 0; --d) {
      uint c = rest % p.dims[d];
      rest /= p.dims[d];
      ia += c * p.a_stride[d];
      ib += c * p.b_stride[d];
    }
    o[i] = T(combine(float(a[ia]), float(b[ib])));
  }
#endif
}
