#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// FMA peak probe for `vkformer bench`: how many fp32 FLOP/s the device can issue when nothing
// but arithmetic is asked of it.
//
// Each invocation runs ACC independent vec4 accumulator chains, acc = fma(acc, x, y), for
// 8 * p.iterations rounds (a loop of 8 unrolled rounds), so ACC * 4 fmas are in flight at once to
// hide the FMA latency. (Fully unrolled straight-line code is no better on GPUs and, measured,
// an order of magnitude slower on lavapipe, so the loop stays.) x and y come from push constants (the compiler cannot fold the chains)
// and are broadcast scalars, so the only registers are the accumulators: ACC is a
// specialization constant and the bench tries a few values, since too few leave FMA units idle
// and too many spill (lavapipe runs 8 invocations per AVX2 SIMD lane set: a vec4 takes 4 of its
// 16 ymm registers). The one store per invocation, of the sum of the chains, keeps them alive;
// its traffic is negligible (the output wraps around a small buffer). FLOPs per invocation: 8 * iterations * ACC * 4 lanes * 2.
// DTYPES f32 only: the probe measures fp32 math, which every kernel uses (fp16 is storage).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ACC = 4;  // independent vec4 accumulators, 1..16

layout(set = 0, binding = 0) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push {
  uint iterations;  // outer rounds, each 8 fmas per accumulator
  float x;          // multiplier, ~1 - 1e-7 keeps the values bounded and normal
  float y;          // addend
} p;

#define STEP(a) a = fma(a, vx, vy)
#define ROUND                                  \
  STEP(a0);                                    \
  if (ACC > 1) STEP(a1);                       \
  if (ACC > 2) STEP(a2);                       \
  if (ACC > 3) STEP(a3);                       \
  if (ACC > 4) STEP(a4);                       \
  if (ACC > 5) STEP(a5);                       \
  if (ACC > 6) STEP(a6);                       \
  if (ACC > 7) STEP(a7);                       \
  if (ACC > 8) STEP(a8);                       \
  if (ACC > 9) STEP(a9);                       \
  if (ACC > 10) STEP(a10);                     \
  if (ACC > 11) STEP(a11);                     \
  if (ACC > 12) STEP(a12);                     \
  if (ACC > 13) STEP(a13);                     \
  if (ACC > 14) STEP(a14);                     \
  if (ACC > 15) STEP(a15)

void main() {
  const float seed = float(gl_GlobalInvocationID.x & 1023u) * 1e-3;
  const vec4 vx = vec4(p.x), vy = vec4(p.y);
  vec4 a0 = vec4(seed, seed + 1.0, seed + 2.0, seed + 3.0);
  vec4 a1 = a0 + 0.5, a2 = a0 + 1.0, a3 = a0 + 1.5, a4 = a0 + 2.0, a5 = a0 + 2.5;
  vec4 a6 = a0 + 3.0, a7 = a0 + 3.5, a8 = a0 + 4.0, a9 = a0 + 4.5, a10 = a0 + 5.0;
  vec4 a11 = a0 + 5.5, a12 = a0 + 6.0, a13 = a0 + 6.5, a14 = a0 + 7.0, a15 = a0 + 7.5;
#define ROUND8 ROUND; ROUND; ROUND; ROUND; ROUND; ROUND; ROUND; ROUND
  for (uint i = 0; i < p.iterations; ++i) {
    ROUND8;
  }
  vec4 s = a0;
  if (ACC > 1) s += a1;
  if (ACC > 2) s += a2;
  if (ACC > 3) s += a3;
  if (ACC > 4) s += a4;
  if (ACC > 5) s += a5;
  if (ACC > 6) s += a6;
  if (ACC > 7) s += a7;
  if (ACC > 8) s += a8;
  if (ACC > 9) s += a9;
  if (ACC > 10) s += a10;
  if (ACC > 11) s += a11;
  if (ACC > 12) s += a12;
  if (ACC > 13) s += a13;
  if (ACC > 14) s += a14;
  if (ACC > 15) s += a15;
  o[gl_GlobalInvocationID.x % o.length()] = s.x + s.y + s.z + s.w;
}
