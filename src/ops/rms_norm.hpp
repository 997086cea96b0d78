#pragma once
// rms_norm as a building block for other lowerings (linear's pre-norm fallback).
#include "lowering.hpp"

namespace vkformer::ops {

// out = x * rsqrt(mean(x^2) + eps) * weight over the last dim, on program values of one float
// dtype (weight [D]); one dispatch per window of rows. With a residual (out's shape), out is
// residual + the above, in the same dispatch.
void emit_rms_norm(Lowering& l, uint32_t x, uint32_t weight, uint32_t out, float eps,
                   uint32_t residual = kNoValue);

}  // namespace vkformer::ops
