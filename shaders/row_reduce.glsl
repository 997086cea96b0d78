// Reductions over the LANES invocations of a CPU-shaped row workgroup (softmax_rows,
// layer_norm_rows), the result in every invocation. Include after LANES is declared.
//
// USE_SUBGROUP (LANES is the device's fixed subgroup size): a butterfly of subgroupShuffleXor,
// log2(LANES) vector permutes on a CPU. lavapipe 22.3 compiles subgroupAdd and subgroupMax to a
// scalar loop over the lanes through the stack, which cost a short softmax row 1.29x its time.
// Each step combines a value with its partner's, so every invocation ends with bit-identical
// results (float addition is commutative). Without subgroups: shared memory and barriers.
#ifndef VKF_ROW_REDUCE_GLSL
#define VKF_ROW_REDUCE_GLSL

#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require

// Unrolled by hand: LANES is a specialization constant, so the dead steps fold away.
#define VKF_BUTTERFLY(v, op)                                    \
  if (LANES > 32) v = op(v, subgroupShuffleXor(v, 32));         \
  if (LANES > 16) v = op(v, subgroupShuffleXor(v, 16));         \
  if (LANES > 8) v = op(v, subgroupShuffleXor(v, 8));           \
  if (LANES > 4) v = op(v, subgroupShuffleXor(v, 4));           \
  if (LANES > 2) v = op(v, subgroupShuffleXor(v, 2));           \
  if (LANES > 1) v = op(v, subgroupShuffleXor(v, 1));

float vkf_add(float a, float b) { return a + b; }

float row_max(float v) {
  VKF_BUTTERFLY(v, max)
  return v;
}

float row_sum(float v) {
  VKF_BUTTERFLY(v, vkf_add)
  return v;
}

#else

shared float vkf_row_part[LANES];

float row_max(float v) {
  vkf_row_part[gl_LocalInvocationID.x] = v;
  barrier();
  float m = vkf_row_part[0];
  for (uint i = 1; i < LANES; ++i) m = max(m, vkf_row_part[i]);
  barrier();  // the array is reused by the next reduction
  return m;
}

float row_sum(float v) {
  vkf_row_part[gl_LocalInvocationID.x] = v;
  barrier();
  float s = 0.0;
  for (uint i = 0; i < LANES; ++i) s += vkf_row_part[i];
  barrier();
  return s;
}

#endif
#endif
