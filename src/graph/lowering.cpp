#include "lowering.hpp"

#include <algorithm>

namespace vkformer {

uint32_t Lowering::temp(const Shape& shape, DType dtype) {
  program_.values.push_back({shape, dtype, ValueKind::activation, kNoValue});
  return static_cast<uint32_t>(program_.values.size() - 1);
}

uint32_t Lowering::view(uint32_t value, const Shape& shape) {
  const ValueDesc v = program_.values[value];  // a copy: push_back may move the deque's ends
  if (shape.numel() != v.shape.numel())
    throw Error(ErrorCode::internal, node_.label + ": a view " + shape.str() + " of " +
                                         v.shape.str() + " changes the element count");
  program_.values.push_back({shape, v.dtype, v.kind, value, 0});
  return static_cast<uint32_t>(program_.values.size() - 1);
}

uint32_t Lowering::constant(HostTensor value) {
  program_.values.push_back({value.shape(), value.dtype(), ValueKind::constant, kNoValue});
  uint32_t id = static_cast<uint32_t>(program_.values.size() - 1);
  program_.constants.emplace(id, std::move(value));
  return id;
}

void Lowering::require_index_bound(uint32_t value, int64_t lo, int64_t hi, const std::string& why) {
  const uint32_t root = program_.root(value);
  const std::string reason = node_.label + ": " + why;
  if (program_.values[root].kind == ValueKind::constant) {
    auto c = program_.constants.find(root);
    if (c == program_.constants.end() || c->second.dtype() != DType::i32) return;
    const auto* ids = reinterpret_cast<const int32_t*>(c->second.data());
    for (int64_t i = 0; i < c->second.numel(); ++i)
      if (ids[i] < lo || ids[i] >= hi)
        throw Error(ErrorCode::invalid_argument,
                    "constant index " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                        " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "): " + reason);
    return;
  }
  if (program_.values[root].kind != ValueKind::input) return;
  program_.index_bounds[root].push_back({lo, hi, reason});
}

const kernels::VariantEntry& Lowering::variant(kernels::Kernel kernel, DType dtype) const {
  const auto* v = kernels::find_variant(kernel, dtype);
  if (!v)
    throw Error(ErrorCode::unsupported, node_.label + ": kernel " + kernels::family_name(kernel) +
                                            " has no " + std::string(dtype_name(dtype)) +
                                            " variant");
  device_.pipelines().check_supported(*v);
  return *v;
}

bool Lowering::supported(kernels::Kernel kernel, DType dtype) const {
  const auto* v = kernels::find_variant(kernel, dtype);
  return v && device_.pipelines().supported(*v);
}

void Lowering::dispatch(kernels::Kernel kernel, DType dtype, std::vector<Binding> bindings,
                        const PushBlock& push, std::array<uint32_t, 3> groups,
                        std::vector<uint32_t> spec) {
  Dispatch d;
  d.kernel = &variant(kernel, dtype);
  d.spec = std::move(spec);
  d.push = push;
  d.bindings = std::move(bindings);
  d.groups = groups;
  d.node = node_index_;
  for (auto& b : d.bindings)
    if (b.value >= program_.values.size())
      throw Error(ErrorCode::internal, node_.label + ": dispatch binds an unknown value");
  if (groups[0] == 0 || groups[1] == 0 || groups[2] == 0) return;  // nothing to do
  program_.dispatches.push_back(std::move(d));
}

std::array<uint32_t, 3> Lowering::grid(uint64_t x, uint64_t y, uint64_t z) const {
  const auto& max = info().max_workgroup_count;
  if (x > max[0] || y > max[1] || z > max[2])
    throw Error(ErrorCode::unsupported,
                node_.label + ": needs a grid of " + std::to_string(x) + "x" + std::to_string(y) +
                    "x" + std::to_string(z) + " workgroups, more than device '" + info().name +
                    "' allows (" + std::to_string(max[0]) + "x" + std::to_string(max[1]) + "x" +
                    std::to_string(max[2]) + ")");
  return {static_cast<uint32_t>(x), static_cast<uint32_t>(y), static_cast<uint32_t>(z)};
}

std::array<uint32_t, 3> Lowering::rows_grid(uint64_t count) const {
  uint64_t max_x = info().max_workgroup_count[0];
  uint64_t x = std::min<uint64_t>(count, max_x);
  uint64_t y = x ? (count + x - 1) / x : 0;
  return grid(x, y, 1);
}

const OpRegistry& builtin_ops() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_builtin_ops(r);
    return r;
  }();
  return registry;
}

}  // namespace vkformer
