#pragma once
// One matmul case against the double-precision reference, shared by matmul_test and
// coopmat_test: the graph is built and run on a device, the output compared and the error printed
// with the path the device took.
//
// Tolerances. Inputs are uniform in [-1, 1); f16 references are computed from the stored
// (rounded) inputs, so only the kernel's own arithmetic is measured. With S = |alpha| * sqrt(K) *
// max|a| * max|b| + max|bias| (the scale of the outputs), fp32 accumulation of K products errs by
// about sqrt(K) * 2^-24 * S (rounding errors add like a random walk); we allow 8x that, plus a
// relative 2^-21 for alpha, bias and the activation (and erf's 1.5e-7 approximation error, which
// the absolute term covers). f16 adds the output rounding: 2^-11 relative, 2^-25 absolute near 0.
#include <cstdint>
#include <string>

#include "matmul_paths.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer::testing {

struct MatmulCase {
  Shape a, b;
  bool transpose_b = false;
  bool bias = false;
  float alpha = 1.0f;
  Activation act = Activation::none;
  DType dtype = DType::f32;
};

inline MatmulCase tb(MatmulCase c) { return c.transpose_b = true, c; }
inline MatmulCase with_bias(MatmulCase c) { return c.bias = true, c; }
inline MatmulCase with(MatmulCase c, float alpha, Activation act) {
  return c.alpha = alpha, c.act = act, c;
}
inline MatmulCase f16(MatmulCase c) { return c.dtype = DType::f16, c; }

std::string case_name(const MatmulCase& c);  // "7x13_by_13x31T_bias_alpha_gelu_f16"

// The kernel variants `device` can run (built and with their features enabled).
kernels::KernelSupport kernels_on(Device& device);
// The plan the lowering makes for `c` on `device`.
kernels::MatmulPlan plan_on(Device& device, const MatmulCase& c);
std::string plan_name(const kernels::MatmulPlan& plan);

struct Outcome {
  double max_error = 0;  // max abs error
  double scale = 0;      // S above
};

// Builds and runs the matmul of `c` on `device` and compares it with the reference (a test
// failure beyond the tolerance).
Outcome check_matmul(Device& device, const MatmulCase& c, uint32_t seed = 1);

}  // namespace vkformer::testing
