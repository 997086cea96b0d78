#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#include "common.glsl"
// Converts between f32 and f16. The variant's dtype is the source: cast_f32 writes f16,
// cast_f16 writes f32 (values beyond the f16 range become +-inf, as in PyTorch).

layout(local_size_x_id = 0) in;

#if defined(DTYPE_F16)
#define OUT_T float
#define OUT_T4 vec4
#else
#define OUT_T float16_t
#define OUT_T4 f16vec4
#endif

#ifdef VEC4
// Four elements per invocation: n counts vec4s.
layout(set = 0, binding = 0) readonly buffer X { T4 x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { OUT_T4 y[]; };
#else
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { OUT_T y[]; };
#endif
layout(push_constant) uniform Push { uint n; } p;

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
#ifdef VEC4
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) y[i] = OUT_T4(vec4(x[i]));
#else
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) y[i] = OUT_T(float(x[i]));
#endif
}
