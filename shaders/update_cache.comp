#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// KV-cache append: cache[b, h, p + i, :] = rows[b, h, i, :] for the n new rows, where p is read
// from a buffer so one recorded dispatch serves every decoding step. A grid-stride loop over the
// new rows' elements; positions are clamped on the host (Executor::set_input) and here.
// The rows are read through strides, so they can also be the heads of a packed [B, n, C]
// projection (columns offset + h * D + d), which saves a split_heads copy per cache.
// A cache larger than one binding is updated in windows of whole (b, h) slices, one dispatch each.

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Rows { T rows[]; };
layout(set = 0, binding = 1) readonly buffer Position { int position[]; };
layout(set = 0, binding = 2) buffer Cache { T cache[]; };
layout(push_constant) uniform Push {
  uint total;  // B * H * n * D
  uint n;      // new rows per (b, h)
  uint t;      // cache rows per (b, h)
  uint d;      // row length
  uint heads;  // H
  uint stride_b, stride_h, stride_i;  // element strides of rows over b, h and i
  uint offset;                        // element offset of rows[0, 0, 0, 0]
  uint bh_base;  // the cache is bound as a window from (b, h) = bh_base on (rows whole)
} p;

void main() {
  uint first = uint(clamp(position[0], 0, int(p.t - p.n)));
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint e = gl_GlobalInvocationID.x; e < p.total; e += stride) {
    uint col = e % p.d;
    uint row = e / p.d;       // (b * H + h) * n + i
    uint i = row % p.n;
    uint bh = row / p.n;  // within the cache's window
    uint g = p.bh_base + bh;
    uint src = p.offset + (g / p.heads) * p.stride_b + (g % p.heads) * p.stride_h +
               i * p.stride_i + col;
    cache[(bh * p.t + first + i) * p.d + col] = rows[src];
  }
}
