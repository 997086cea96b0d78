#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// split_heads / concat_heads: a pure copy between the head-major layout [B, H, S, D] and the
// packed layout [B, S, C], where head h's columns are [offset + h*D, offset + (h+1)*D) of C.
//
// One invocation per element of the head-major side in a grid-stride loop, so the [B,H,S,D]
// side is read (split: written) contiguously and the packed side in runs of D. Both sides are
// contiguous along d, so either direction coalesces equally well.
//
// VEC4=1 builds a variant that moves 4 elements per invocation (16 bytes for f32); the lowering
// picks it when D, C and offset are all multiples of 4, and passes every size in units of 4
// elements. The kernel only copies, so it never converts: U is the storage type (T or T4).

#ifdef VEC4
#define U T4
#else
#define U T
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint CONCAT = 0;  // 0: [B,S,C] -> [B,H,S,D]; 1: the inverse

layout(set = 0, binding = 0) readonly buffer Src { U src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { U dst[]; };
layout(push_constant) uniform Push {
  uint n;       // B*H*S*D, in units of U
  uint d;       // head width D
  uint s;       // sequence length S
  uint h;       // heads H
  uint c;       // row length C of the packed side
  uint offset;  // first column of head 0 within a packed row
} p;

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    uint d = i % p.d;
    uint row = i / p.d;  // (b*H + h)*S + s
    uint s = row % p.s;
    uint bh = row / p.s;
    uint h = bh % p.h;
    uint b = bh / p.h;
    uint packed = (b * p.s + s) * p.c + p.offset + h * p.d + d;
    if (CONCAT == 0)
      dst[i] = src[packed];
    else
      dst[packed] = src[i];
  }
}
