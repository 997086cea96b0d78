#include "op_common.hpp"

#include <algorithm>
#include <cmath>

namespace vkformer::ops {

void require_float(const GraphImpl& g, const std::string& op, const char* arg, const Tensor& t) {
  g.check(t, op, arg);
  if (!is_float(t.dtype))
    shape_error(g.label(op), std::string(arg) + " must be f32 or f16, got " + describe(t));
}

void require_finite(const GraphImpl& g, const std::string& op, const char* arg, float value) {
  if (!std::isfinite(value))
    throw Error(ErrorCode::invalid_argument,
                g.label(op) + ": " + arg + " is " + std::to_string(value) + ", expected a finite number");
}

void require_dtype(const GraphImpl& g, const std::string& op, const char* arg, const Tensor& t,
                   DType dtype) {
  g.check(t, op, arg);
  if (t.dtype != dtype)
    shape_error(g.label(op), std::string(arg) + " must be " + std::string(dtype_name(dtype)) +
                                 ", got " + describe(t));
}

void require_rank(const GraphImpl& g, const std::string& op, const char* arg, const Tensor& t,
                  int lo, int hi) {
  g.check(t, op, arg);
  if (t.shape.rank() < lo || t.shape.rank() > hi)
    shape_error(g.label(op), std::string(arg) + " must have rank " + std::to_string(lo) +
                                 (lo == hi ? "" : " to " + std::to_string(hi)) + ", got " +
                                 describe(t));
}

void require_additive_mask(const GraphImpl& g, const std::string& op, const Tensor& mask,
                           const char* like_name, const Tensor& like, const Shape& target,
                           const std::string& target_desc) {
  require_float(g, op, "mask", mask);
  if (mask.dtype != like.dtype)
    shape_error(g.label(op), "mask " + describe(mask) + " must have " + like_name + "'s dtype; " +
                                 like_name + " is " + describe(like));
  Shape b;
  if (!broadcast_shapes(mask.shape, target, &b) || b != target)
    shape_error(g.label(op), "mask " + mask.shape.str() + " does not broadcast to " + target_desc);
}

void broadcast_strides4(const Shape& in, const Shape& out, uint32_t strides[4]) {
  int offset = 4 - out.rank();
  int in_offset = 4 - in.rank();
  uint32_t s = 1;
  for (int d = 3; d >= 0; --d) {
    int64_t od = d >= offset ? out[d - offset] : 1;
    int64_t id = d >= in_offset ? in[d - in_offset] : 1;
    strides[d] = (id == 1 && od != 1) ? 0 : s;
    s *= static_cast<uint32_t>(id);
  }
}

std::array<uint32_t, 3> elementwise_grid(const Lowering& l, uint64_t n) {
  uint64_t groups = (n + kElementwiseWorkgroup - 1) / kElementwiseWorkgroup;
  groups = std::min<uint64_t>(groups, l.info().max_workgroup_count[0]);
  return {static_cast<uint32_t>(std::max<uint64_t>(groups, 1)), 1, 1};
}

}  // namespace vkformer::ops
