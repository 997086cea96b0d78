#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Embedding lookup from a table stored in a weight dtype (bf16 or a quantized type; see
// weights.glsl): out[t, j] = table[clamp(ids[t], 0, V-1), j] dequantized, stored as T.
// As embedding.comp: a grid-stride loop, ids clamped, and a table larger than one binding bound
// as windows of rows [first, first + count), one dispatch each. A quantized table is read four
// elements (one group of a block) per invocation; bf16 one element.

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Ids { int ids[]; };
layout(set = 0, binding = 1) readonly buffer W { uint w[]; };
layout(set = 0, binding = 2) writeonly buffer Out { T o[]; };
layout(push_constant) uniform Push {
  uint n;       // tokens * D / 4 (quantized) or tokens * D
  uint d;       // row width D, in elements
  uint vocab;   // V, rows of the table
  uint first;   // the first row of the table this dispatch binds
  uint count;   // rows bound (V when the table is bound whole)
} p;

#include "weights.glsl"

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint row_hw = row_halfwords(p.d);
#ifdef W_QUANTIZED
  const uint groups = p.d / 4u;
#else
  const uint groups = p.d;
#endif
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const uint t = i / groups, j = i - t * groups;
    const uint row = uint(clamp(ids[t], 0, int(p.vocab) - 1)) - p.first;  // wraps below first
    if (row >= p.count) continue;
#ifdef W_QUANTIZED
    const vec4 v = block_values(row * row_hw, j / 8u, j % 8u);
    for (uint c = 0; c < 4u; ++c) o[t * p.d + 4u * j + c] = T(v[c]);
#else
    o[t * p.d + j] = T(weight_at(row * row_hw, j));
#endif
  }
}
