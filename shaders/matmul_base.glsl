// What every matmul kernel shares: the push block (src/ops/matmul.hpp's MatmulPush, and the
// weight kernels' copy in src/ops/matmul_weights.cpp) and the fused epilogue of one output.
// Include after the kernel's specialization constants: ACT, and with MATMUL_FUSIONS defined
// GATED and HAS_RESIDUAL (kernels without them get both as 0). MATMUL_PUSH_EPS adds the
// fused norm's epsilon to the block (matmul_wq_vec.comp, matmul_wq_rows.comp), MATMUL_PUSH_FLAGS
// a word of run-time fusion flags (matmul_wq_texel.comp).
#ifndef VKF_MATMUL_BASE_GLSL
#define VKF_MATMUL_BASE_GLSL

#include "activations.glsl"

layout(push_constant) uniform Push {
  uint M, N, K;
  uint batch1;                // out's inner batch dim: z = z0 * batch1 + z1
  uint a_stride0, a_stride1;  // element strides of a per batch dim (0: broadcast)
  uint b_stride0, b_stride1;
  uint y_base;                // first tile row of this dispatch
  uint z_base;                // first batch (times splits with SPLIT_K) of this dispatch
  float alpha;
  uint splits;                // SPLIT_K: K ranges per batch
  uint k_split;               // SPLIT_K: K per range (a multiple of BK)
  uint ldo;                   // out's row stride (N, or more when out is a window's columns)
#ifdef MATMUL_PUSH_EPS
  float eps;                  // the fused norm's epsilon
#endif
#ifdef MATMUL_PUSH_FLAGS
  uint flags;                 // run-time fusions (matmul_wq_texel.comp): 1 gated, 2 residual
#endif
} p;

#ifndef MATMUL_FUSIONS
const uint GATED = 0u;
const uint HAS_RESIDUAL = 0u;
#endif

// One output from its scaled product x = alpha · (a · w) + bias: act(x), or with GATED
// act(gate = x) · up (SwiGLU with silu, GeGLU with gelu), then + residual with HAS_RESIDUAL.
// The one place a new epilogue goes (a new activation goes in activations.glsl's activate).
float matmul_epilogue(float x, float up, float residual) {
  float v = activate(x, ACT);
  if (GATED != 0u) v *= up;
  if (HAS_RESIDUAL != 0u) v += residual;
  return v;
}

#endif
