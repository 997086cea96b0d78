#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "hadamard.glsl"
// y = x · H per block of BLOCK consecutive elements (a power of two), H the orthonormal
// Walsh-Hadamard matrix of Sylvester's construction, H[i][j] = (-1)^popcount(i & j) / sqrt(n)
// (symmetric, H·H = I: the same op undoes itself). Graph::hadamard: what llama.cpp's attention
// rotation (PR 21038) multiplies q, k and v by before quantized caches store them, here the
// attention output's way back.
//
// One invocation per block: its BLOCK inputs loaded once into a private array, the fast
// Walsh-Hadamard transform in place (log2 BLOCK passes of BLOCK / 2 butterflies, fp32), then
// scaled and stored. An invocation per output element summing its block's n inputs loaded n
// times over (the first version) made the loads the cost: on lavapipe, where a buffer load is a
// loop over the lanes with bounds checks, the rotation's way back after each layer's attention
// cost a 2048-token prompt with q8_0 caches more than the attention's own cache reads
// (bench/RESULTS.md, "the prompt at ctx 2048 with q8_0 K/V"). BLOCK is a specialization constant
// (64 for v, up to the head dim for k), so the array has the block's size.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BLOCK = 64;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T y[]; };
layout(push_constant) uniform Push {
  uint n;      // elements, a multiple of BLOCK
  uint block;  // BLOCK
  float norm;  // 1 / sqrt(BLOCK)
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint b = gl_GlobalInvocationID.x; b < p.n / BLOCK; b += stride) {
    const uint first = b * BLOCK;
    float v[BLOCK];
    for (uint j = 0; j < BLOCK; ++j) v[j] = float(x[first + j]);
    for (uint h = 1; h < BLOCK; h <<= 1)
      for (uint k = 0; k < BLOCK / 2; ++k) {
        const uint i = hadamard_butterfly(k, h);
        const float a = v[i], c = v[i + h];
        v[i] = a + c;
        v[i + h] = a - c;
      }
    for (uint j = 0; j < BLOCK; ++j) y[first + j] = T(v[j] * p.norm);
  }
}
