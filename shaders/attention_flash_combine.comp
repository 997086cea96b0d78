#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// The second dispatch of split-K flash decoding (attention_flash_decode.comp): for each query
// row, the key ranges' partial results (unnormalized output o_s, max m_s, sum l_s, fp32) meet at
// their common max M: out = sum_s o_s exp(m_s - M) / sum_s l_s exp(m_s - M). Ranges without a
// visible key (m_s = -inf) add nothing; a row without any gives zeros.
// One workgroup per output row, WG invocations over its dv columns.

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(set = 0, binding = 0) readonly buffer PartOut { float part_o[]; };  // [pairs, splits, rows, dv]
layout(set = 0, binding = 1) readonly buffer PartMl { vec2 part_ml[]; };   // [pairs, splits, rows]
layout(set = 0, binding = 2) writeonly buffer Out { T o[]; };              // [pairs * rows, dv]
layout(push_constant) uniform Push {  // CombinePush in src/ops/attention_flash.cpp
  uint total_rows;  // pairs * rows
  uint rows;        // query rows per (b, KV head)
  uint splits;
  uint dv;
} p;

void main() {
  const uint row = flat_workgroup_id();
  if (row >= p.total_rows) return;
  const uint pair = row / p.rows, r = row % p.rows;
  float mx = NEG_INF;
  for (uint s = 0; s < p.splits; ++s) mx = max(mx, part_ml[(pair * p.splits + s) * p.rows + r].x);
  float l = 0.0;
  for (uint s = 0; s < p.splits; ++s) {
    const vec2 ml = part_ml[(pair * p.splits + s) * p.rows + r];
    if (ml.x != NEG_INF) l += ml.y * exp(ml.x - mx);
  }
  for (uint d = gl_LocalInvocationID.x; d < p.dv; d += WG) {
    float sum = 0.0;
    for (uint s = 0; s < p.splits; ++s) {
      const uint part = (pair * p.splits + s) * p.rows + r;
      const float m = part_ml[part].x;
      if (m != NEG_INF) sum += part_o[part * p.dv + d] * exp(m - mx);
    }
    o[row * p.dv + d] = T(l > 0.0 ? sum / l : 0.0);
  }
}
