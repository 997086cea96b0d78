#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// y = x / max(||x||_2, eps) for each row of the last dim (torch.nn.functional.normalize).
// One invocation per row: the rows are sentence embeddings, few and short (hundreds of
// features), so a serial fp32 sum of squares costs less than a workgroup reduction's barriers.

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T y[]; };
layout(push_constant) uniform Push {
  uint rows;
  uint d;
  float eps;
} p;

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint r = gl_GlobalInvocationID.x; r < p.rows; r += stride) {
    uint base = r * p.d;
    float ss = 0.0;
    for (uint j = 0u; j < p.d; ++j) {
      float v = float(x[base + j]);
      ss += v * v;
    }
    // A division, as torch does, rather than a multiplication by the inverse (one rounding less).
    float norm = max(sqrt(ss), p.eps);
    for (uint j = 0u; j < p.d; ++j) y[base + j] = T(float(x[base + j]) / norm);
  }
}
