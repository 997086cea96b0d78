#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
// y = x * rsqrt(mean(x^2) + eps) * weight over the last dim D (Llama's RMSNorm, as llama.cpp
// and Hugging Face compute it: eps inside the square root, the weight applied after).
//
// A workgroup of WG invocations takes ROWS consecutive rows, one after the other (ROWS > 1 on
// CPU devices, where a workgroup is one thread and costs about as much as a row of hundreds of
// elements; 1 on GPUs). Each invocation sums the squares of its strided elements in fp32; the
// workgroup adds those partial sums with subgroupAdd plus one shared slot per subgroup
// (USE_SUBGROUP: any subgroup size, partial subgroups included) or a shared-memory tree (WG a
// power of two, which the lowering guarantees). A second pass over the row (from cache) writes
// the outputs. No cancellation can occur: every term is non-negative.
// RESIDUAL: y = r + the above, r [rows, D] at binding 3 (Gemma's post-norms, whose outputs go
// straight into the residual stream), summed in fp32.
// HEADS: the rows are the heads of a packed qkv projection, Q + 2 KV heads of D per token (Qwen3's
// and Gemma 3's q/k norms on one projection): a token's Q query heads are normed with `weight`,
// its KV key heads with the key weight at binding 3, and its KV value heads copied unchanged.

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;   // the workgroup size again, to size shared arrays
layout(constant_id = 1) const uint ROWS = 1;  // rows per workgroup

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer Weight { T weight[]; };  // [D]
layout(set = 0, binding = 2) writeonly buffer Y { T y[]; };
#ifdef RESIDUAL
layout(set = 0, binding = 3) readonly buffer R { T r[]; };
#endif
#ifdef HEADS
layout(set = 0, binding = 3) readonly buffer KWeight { T k_weight[]; };  // [D]
#endif
layout(push_constant) uniform Push {
  uint rows;
  uint d;
  float eps;
#ifdef HEADS
  uint q_heads;   // Q
  uint kv_heads;  // KV
#endif
} p;

// Two scratch areas used alternately by successive rows, so that a row's reduction needs no
// barrier to protect the previous row's reads of the other area.
shared float scratch[2 * WG];

// The sum of v over the workgroup, the same value in every invocation.
float workgroup_sum(float v, uint area) {
  uint base = area * WG;
#ifdef USE_SUBGROUP
  float s = subgroupAdd(v);
  if (subgroupElect()) scratch[base + gl_SubgroupID] = s;
  barrier();
  float total = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) total += scratch[base + i];
  return total;
#else
  uint t = gl_LocalInvocationID.x;
  scratch[base + t] = v;
  barrier();
  for (uint stride = WG / 2; stride > 0; stride >>= 1) {
    if (t < stride) scratch[base + t] += scratch[base + t + stride];
    barrier();
  }
  return scratch[base];
#endif
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint first_row = flat_workgroup_id() * ROWS;
  uint sums = 0;  // reductions so far: they alternate scratch areas (value heads take none)
  for (uint rr = 0; rr < ROWS; ++rr) {
    const uint row = first_row + rr;
    if (row >= p.rows) return;  // uniform over the workgroup
    const uint first = row * p.d;
#ifdef HEADS
    const uint head = row % (p.q_heads + 2u * p.kv_heads);  // uniform
    if (head >= p.q_heads + p.kv_heads) {  // a value head
      for (uint j = t; j < p.d; j += WG) y[first + j] = x[first + j];
      continue;
    }
    const bool key = head >= p.q_heads;
#endif
    float ss = 0.0;
    for (uint j = t; j < p.d; j += WG) {
      const float v = float(x[first + j]);
      ss += v * v;
    }
    const float scale = inversesqrt(workgroup_sum(ss, sums++ & 1u) / float(p.d) + p.eps);
    for (uint j = t; j < p.d; j += WG) {
#ifdef HEADS
      float v = float(x[first + j]) * scale * float(key ? k_weight[j] : weight[j]);
#else
      float v = float(x[first + j]) * scale * float(weight[j]);
#endif
#ifdef RESIDUAL
      v += float(r[first + j]);
#endif
      y[first + j] = T(v);
    }
  }
}
