#pragma once
// Helpers shared by the op families: argument checks with uniform messages, and launch sizes.
#include <string>

#include "graph_impl.hpp"
#include "lowering.hpp"

namespace vkformer::ops {

constexpr uint32_t kElementwiseWorkgroup = 256;

// Throws unless `t` is a float tensor (f32 or f16).
void require_float(const GraphImpl& g, const std::string& op, const char* arg, const Tensor& t);
// Throws unless `t` has `dtype`.
void require_dtype(const GraphImpl& g, const std::string& op, const char* arg, const Tensor& t,
                   DType dtype);
// Throws unless rank(t) is within [lo, hi].
void require_rank(const GraphImpl& g, const std::string& op, const char* arg, const Tensor& t,
                  int lo, int hi);
// Throws unless `mask` is an additive mask for `target`: float, of `like`'s dtype (`like_name`
// in the message), broadcasting to exactly `target` (`target_desc` in the message).
void require_additive_mask(const GraphImpl& g, const std::string& op, const Tensor& mask,
                           const char* like_name, const Tensor& like, const Shape& target,
                           const std::string& target_desc);

// Throws Error(invalid_argument) unless `value` (an op option named `arg`) is a finite number.
void require_finite(const GraphImpl& g, const std::string& op, const char* arg, float value);

// Strides of `in` right-aligned into rank 4 when broadcast (numpy rules) against `out`; 0 where
// it repeats.
void broadcast_strides4(const Shape& in, const Shape& out, uint32_t strides[4]);

// A 1-D grid for a grid-stride loop over n elements.
std::array<uint32_t, 3> elementwise_grid(const Lowering& l, uint64_t n);

template <class A>
const A& attrs(const Lowering& l) {
  return std::get<A>(l.node().attrs);
}

}  // namespace vkformer::ops
