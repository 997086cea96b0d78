#include "op_common.hpp"

#include <algorithm>

namespace vkformer::ops {

void require_float(const GraphImpl& g, const std::string& op, const char* arg, const Tensor& t) {
  g.check(t, op, arg);
  if (!is_float(t.dtype))
    shape_error(g.label(op), std::string(arg) + " must be f32 or f16, got " + describe(t));
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

std::array<uint32_t, 3> elementwise_grid(const Lowering& l, uint64_t n) {
  uint64_t groups = (n + kElementwiseWorkgroup - 1) / kElementwiseWorkgroup;
  groups = std::min<uint64_t>(groups, l.info().max_workgroup_count[0]);
  return {static_cast<uint32_t>(std::max<uint64_t>(groups, 1)), 1, 1};
}

}  // namespace vkformer::ops
