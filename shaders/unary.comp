#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"
// y = f(x) elementwise over n elements with a grid-stride loop. ACT picks f between scalings:
// y = beta * activate(alpha * x). Scale is ACT 0 with alpha; relu/gelu have alpha 1; soft-capping
// is tanh with alpha 1 / cap and beta cap.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ACT = 0;

#ifdef VEC4
// n counts vec4s: the lowering picks this variant when the element count is a multiple of 4.
layout(set = 0, binding = 0) readonly buffer X { T4 x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T4 y[]; };
#else
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T y[]; };
#endif
layout(push_constant) uniform Push {
  uint n;
  float alpha;
  float beta;
} p;

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
#ifdef VEC4
    vec4 v = p.alpha * vec4(x[i]);
    y[i] = T4(p.beta * vec4(activate(v.x, ACT), activate(v.y, ACT), activate(v.z, ACT), activate(v.w, ACT)));
#else
    y[i] = T(p.beta * activate(p.alpha * float(x[i]), ACT));
#endif
  }
}
