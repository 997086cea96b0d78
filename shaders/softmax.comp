#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Softmax (or log-softmax) over the last dim of x, one workgroup per row.
//
// A row's logits are v_j = x_j * scale + mask_j, and -inf where a boolean mask hides key j
// (causal: j > i + Sk - Sq, or i + key_length - Sq with causal_at_length; key padding; j >= key_length). Each invocation folds its strided
// share of the row into a running pair (m, s) = (max v, sum exp(v - m)) in one pass, rescaling s
// when m grows; the pairs of the workgroup are combined with
//   (m, s) + (m', s') = (M, s exp(m - M) + s' exp(m' - M)),  M = max(m, m'),
// by subgroupMax/subgroupAdd and one slot per subgroup in shared memory (USE_SUBGROUP, any
// subgroup size), or by a shared-memory tree (WG a power of two). A second pass writes
// exp(v - M) / S, or v - M - log(S). -inf logits never enter exp() as -inf - -inf, so a fully
// masked row (M = -inf) gives zeros (log-softmax: -inf), not NaN; huge finite logits only ever
// appear as differences v - M <= 0, so they do not overflow. Arithmetic is fp32.
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;  // a power of two for the shared-memory tree
layout(constant_id = 1) const bool HAS_MASK = false;
layout(constant_id = 2) const bool HAS_KEY_PADDING = false;
layout(constant_id = 3) const bool HAS_KEY_LENGTH = false;
layout(constant_id = 4) const bool CAUSAL = false;
layout(constant_id = 5) const bool LOG_SOFTMAX = false;

// Absent optional inputs are bound to x and never read.
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer Mask { T mask[]; };
layout(set = 0, binding = 2) readonly buffer KeyPadding { int key_padding[]; };  // [B, Sk]
layout(set = 0, binding = 3) readonly buffer KeyLength { int key_length[]; };   // [1]
layout(set = 0, binding = 4) writeonly buffer Out { T o[]; };
layout(push_constant) uniform Push {
  uint rows;          // numel / sk
  uint sk;            // row length (last dim)
  uint sq;            // second-to-last dim of x (1 for rank 1): the causal query index is row % sq
  uint d1;            // x's leading dims padded to rank 4 as [d0, d1, sq, sk]
  float scale;
  uint mask_stride[4];  // mask strides over [d0, d1, sq, sk]; 0 where the mask broadcasts
  uint rows_per_batch;  // rows per key-padding-mask row: numel / (B * sk)
  uint causal_at_length;  // causal aligned to key_length: query i sees keys j <= i + key_length - sq
} p;

// Partial (m, s) pairs: one per invocation for the tree, one per subgroup (at most WG) otherwise.
shared float part_m[WG];
shared float part_s[WG];

struct Stat {
  float m;  // max of the logits seen, -inf if none
  float s;  // sum of exp(v - m) over them
};

Stat combine(Stat a, Stat b) {
  float m = max(a.m, b.m);
  if (m == NEG_INF) return Stat(NEG_INF, 0.0);
  return Stat(m, a.s * exp(a.m - m) + b.s * exp(b.m - m));
}

Stat workgroup_combine(Stat st) {
#ifdef USE_SUBGROUP
  float m = subgroupMax(st.m);
  float s = subgroupAdd(m == NEG_INF ? 0.0 : st.s * exp(st.m - m));
  if (subgroupElect()) {
    part_m[gl_SubgroupID] = m;
    part_s[gl_SubgroupID] = s;
  }
  barrier();
  Stat total = Stat(NEG_INF, 0.0);
  for (uint i = 0; i < gl_NumSubgroups; ++i) total = combine(total, Stat(part_m[i], part_s[i]));
  return total;
#else
  uint t = gl_LocalInvocationID.x;
  part_m[t] = st.m;
  part_s[t] = st.s;
  barrier();
  for (uint half_size = WG / 2; half_size > 0; half_size /= 2) {
    if (t < half_size) {
      Stat c = combine(Stat(part_m[t], part_s[t]), Stat(part_m[t + half_size], part_s[t + half_size]));
      part_m[t] = c.m;
      part_s[t] = c.s;
    }
    barrier();
  }
  return Stat(part_m[0], part_s[0]);
#endif
}

// Key j's logit in the row at x[base]: -inf when hidden (keys j >= limit, padded keys); hidden
// keys are not read, so whatever a KV cache holds past its length cannot leak in.
float logit(uint j, uint base, int limit, uint mask_base, uint pad_base) {
  if (int(j) >= limit || (HAS_KEY_PADDING && key_padding[pad_base + j] != 0)) return NEG_INF;
  float v = float(x[base + j]) * p.scale;
  if (HAS_MASK) v += float(mask[mask_base + j * p.mask_stride[3]]);
  return v;
}

void main() {
  uint row = flat_workgroup_id();
  if (row >= p.rows) return;  // uniform: the whole workgroup leaves
  uint base = row * p.sk;

  // Keys j >= limit are hidden by the causal mask and the key length.
  int limit = int(p.sk);
  if (HAS_KEY_LENGTH) limit = min(limit, key_length[0]);
  const int causal_end = HAS_KEY_LENGTH && p.causal_at_length != 0u ? key_length[0] : int(p.sk);
  if (CAUSAL) limit = min(limit, int(row % p.sq) + causal_end - int(p.sq) + 1);
  uint mask_base = 0;
  if (HAS_MASK) {
    uint i = row % p.sq, rest = row / p.sq;
    mask_base = i * p.mask_stride[2] + (rest % p.d1) * p.mask_stride[1] +
                (rest / p.d1) * p.mask_stride[0];
  }
  uint pad_base = HAS_KEY_PADDING ? (row / p.rows_per_batch) * p.sk : 0;

  Stat st = Stat(NEG_INF, 0.0);
  for (uint j = gl_LocalInvocationID.x; j < p.sk; j += WG) {
    float v = logit(j, base, limit, mask_base, pad_base);
    if (v > st.m) {
      st.s = st.s * exp(st.m - v) + 1.0;
      st.m = v;
    } else if (v > NEG_INF) {
      st.s += exp(v - st.m);
    }
  }
  Stat total = workgroup_combine(st);
  bool empty = total.m == NEG_INF;
  float inv_sum = empty ? 0.0 : 1.0 / total.s;
  float log_sum = empty ? 0.0 : log(total.s);

  for (uint j = gl_LocalInvocationID.x; j < p.sk; j += WG) {
    float v = logit(j, base, limit, mask_base, pad_base);
    float y;
    if (LOG_SOFTMAX)
      y = (empty || v == NEG_INF) ? NEG_INF : v - total.m - log_sum;
    else
      y = (empty || v == NEG_INF) ? 0.0 : exp(v - total.m) * inv_sum;
    o[base + j] = T(y);
  }
}
