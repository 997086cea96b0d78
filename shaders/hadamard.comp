#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// y = x · H per block of n consecutive elements (n a power of two), H the orthonormal
// Walsh-Hadamard matrix of Sylvester's construction, H[i][j] = (-1)^popcount(i & j) / sqrt(n)
// (symmetric, H·H = I: the same op undoes itself). Graph::hadamard: what llama.cpp's attention
// rotation (PR 21038) multiplies q, k and v by before quantized caches store them, here the
// attention output's way back. One invocation per output element summing its block's n inputs
// in fp32 (n² work a block; n is 64 to 256 where it is used, against a projection's n·d_model:
// small, and exact to fp32 rounding without the barriers of a butterfly).

layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T y[]; };
layout(push_constant) uniform Push {
  uint n;      // elements
  uint block;  // a power of two
  float norm;  // 1 / sqrt(block)
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += stride) {
    const uint i = e % p.block, first = e - i;
    float acc = 0.0;
    for (uint j = 0; j < p.block; ++j) {
      const float v = float(x[first + j]);
      acc += (bitCount(i & j) & 1) != 0 ? -v : v;
    }
    y[e] = T(acc * p.norm);
  }
}
