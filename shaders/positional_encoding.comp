#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// out[b, s, j] = x[b, s, j] * input_scale + pe[row(s), j] for x [B, S, D] (B = 1 for [S, D]).
//
// The sinusoidal table pe is an f32 constant computed on the host (see src/ops/embedding.cpp
// for why it is not evaluated here with sin/cos). Without a run-time offset it holds exactly
// the S rows the graph needs and row(s) = s. With one (DYNAMIC = 1) it holds max_len rows and
// row(s) = clamp(base + offset_tensor[0] + s, 0, max_len - 1): positions past the table repeat
// its last row instead of reading out of bounds.
//
// One invocation per element in a grid-stride loop; the table row is shared by the B batch
// entries. Any D, odd included: the table is stored with the same row width as x.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint DYNAMIC = 0;

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer Pe { float pe[]; };
// The i32 [1] offset tensor when DYNAMIC = 1. Otherwise the lowering binds the table here too
// (a kernel's bindings are fixed) and the shader never reads it.
layout(set = 0, binding = 2) readonly buffer Offset { int offset_tensor[]; };
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(push_constant) uniform Push {
  uint n;        // B * S * D
  uint d;        // D
  uint s;        // S
  uint rows;     // rows of the table
  int base;      // the static offset (DYNAMIC only; otherwise folded into the table)
  float scale;   // input_scale
} p;

void main() {
  // Clamp the run-time offset before adding so that no i32 value can overflow: the lowering
  // keeps rows, base and S far below 2^29.
  int shift = 0;
  if (DYNAMIC != 0) shift = p.base + clamp(offset_tensor[0], -int(p.rows), int(p.rows));
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    uint row_index = i / p.d;
    uint j = i - row_index * p.d;
    uint s = row_index % p.s;
    uint row = uint(clamp(shift + int(s), 0, int(p.rows) - 1));
    o[i] = T(float(x[i]) * p.scale + pe[row * p.d + j]);
  }
}
