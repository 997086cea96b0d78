#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Sentence pooling, as sentence-transformers' Pooling module: out[b, j] from x[b, s, j] over the
// tokens s whose mask[b, s] is nonzero (Hugging Face's attention_mask: 1 = token, 0 = padding).
//   MODE 0 mean: sum_s x * m / max(sum_s m, 1e-9)   (no kept token: 0)
//   MODE 1 cls:  x[b, 0, j]                        (the mask is not read)
//   MODE 2 max:  max_s (m ? x : -1e9)
// One invocation per output element in a grid-stride loop, walking the S tokens in order in
// fp32: B * D invocations are plenty for the few rows a batch has, and the sum's order is the
// same whatever the padding, so padding cannot change a result.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MODE = 0;

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer Mask { int mask[]; };
layout(set = 0, binding = 2) writeonly buffer Out { T o[]; };
layout(push_constant) uniform Push {
  uint n;  // B * D
  uint s;  // S
  uint d;  // D
} p;

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    uint b = i / p.d, j = i % p.d;
    uint row = b * p.s;
    float r;
    if (MODE == 1u) {
      r = float(x[row * p.d + j]);
    } else if (MODE == 2u) {
      r = -1e9;
      for (uint t = 0u; t < p.s; ++t)
        r = max(r, mask[row + t] != 0 ? float(x[(row + t) * p.d + j]) : -1e9);
    } else {
      float sum = 0.0, count = 0.0;
      for (uint t = 0u; t < p.s; ++t) {
        if (mask[row + t] != 0) {
          sum += float(x[(row + t) * p.d + j]);
          count += 1.0;
        }
      }
      r = sum / max(count, 1e-9);
    }
    o[i] = T(r);
  }
}
