#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "rope.glsl"
// Rotary position embedding on rows of D elements (x [.., S, D]): row s has position
// pos = base + offset_tensor[0] (DYNAMIC) + s, and pair i < dims / 2 is rotated by
// theta_i = pos * inv_freq[i]:
//   (x_a, x_b) -> (x_a cos - x_b sin, x_a sin + x_b cos),
// with (a, b) = (2i, 2i + 1) (NEOX = 0, GGUF's "normal" mode) or (i, i + dims / 2) (NEOX = 1).
// Columns dims..D-1 are copied. One invocation per pair or copied column, grid-stride loop.
// The angle and its reduction: rope.glsl.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint NEOX = 0;
layout(constant_id = 2) const uint DYNAMIC = 0;

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer InvFreq { float inv_freq[]; };  // [dims / 2]
// The i32 [1] offset tensor when DYNAMIC = 1; otherwise the lowering binds inv_freq here too.
layout(set = 0, binding = 2) readonly buffer Offset { int offset_tensor[]; };
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(push_constant) uniform Push {
  uint n;        // rows * per_row
  uint per_row;  // work items per row: dims / 2 pairs, then D - dims copied columns
  uint d;        // D
  uint half_dims;
  uint s;        // rows per sequence (S)
  int base;      // the static offset
} p;

void main() {
  int shift = p.base;
  if (DYNAMIC != 0) shift += clamp(offset_tensor[0], -kMaxPosition, kMaxPosition);
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint k = gl_GlobalInvocationID.x; k < p.n; k += stride) {
    const uint row = k / p.per_row;
    const uint j = k - row * p.per_row;
    const uint first = row * p.d;
    if (j >= p.half_dims) {  // a pass-through column
      const uint c = first + 2 * p.half_dims + (j - p.half_dims);
      o[c] = x[c];
      continue;
    }
    const int pos = clamp(shift + int(row % p.s), 0, kMaxPosition);
    const vec2 cs = rope_cos_sin(pos, inv_freq[j]);
    const float c = cs.x, sn = cs.y;
    const uint ia = first + (NEOX != 0 ? j : 2 * j);
    const uint ib = ia + (NEOX != 0 ? p.half_dims : 1);
    const float xa = float(x[ia]), xb = float(x[ib]);
    o[ia] = T(xa * c - xb * sn);
    o[ib] = T(xa * sn + xb * c);
  }
}
