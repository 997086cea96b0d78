#pragma once
#include <vector>

#include "device_impl.hpp"
#include "graph_impl.hpp"
#include "program.hpp"

namespace vkformer {

// What an op's lowering sees: its node's values, and ways to add temporaries, constants and
// dispatches to the program.
class Lowering {
 public:
  Lowering(DeviceImpl& device, Program& program, const Node& node, uint32_t node_index)
      : device_(device), program_(program), node_(node), node_index_(node_index) {}

  const Node& node() const { return node_; }
  const ValueDesc& value(uint32_t id) const { return program_.values[id]; }
  uint32_t input(size_t i) const { return node_.inputs.at(i); }
  uint32_t output() const { return node_.output; }
  DeviceImpl& device() const { return device_; }
  const DeviceInfo& info() const { return device_.info(); }
  const kernels::Tuning& tuning() const { return device_.tuning(); }

  uint32_t temp(const Shape& shape, DType dtype);
  // `value`'s bytes seen with another shape of the same element count (a reshape inside a
  // lowering, e.g. attention's grouped query heads as one matrix per KV head).
  uint32_t view(uint32_t value, const Shape& shape);
  uint32_t constant(HostTensor value);
  // Entries of the i32 tensor `value` must lie in [lo, hi), for the reason `why` (shown after
  // the node's label in errors): a constant is checked now, the graph input it comes from
  // (directly or through reshapes) when it is set; values computed on the device or held in an
  // external tensor are not checked (the shaders clamp them).
  void require_index_bound(uint32_t value, int64_t lo, int64_t hi, const std::string& why);

  // The variant of `kernel` for `dtype`, checked to run on this device.
  const kernels::VariantEntry& variant(kernels::Kernel kernel, DType dtype) const;
  bool supported(kernels::Kernel kernel, DType dtype) const;

  void dispatch(kernels::Kernel kernel, DType dtype, std::vector<Binding> bindings,
                const PushBlock& push, std::array<uint32_t, 3> groups,
                std::vector<uint32_t> spec = {});

  // Workgroup grids within maxComputeWorkGroupCount. rows_grid spreads `count` workgroups over
  // x and y; shaders recover the index as y * gl_NumWorkGroups.x + x and skip the excess.
  std::array<uint32_t, 3> rows_grid(uint64_t count) const;
  std::array<uint32_t, 3> grid(uint64_t x, uint64_t y, uint64_t z) const;

 private:
  DeviceImpl& device_;
  Program& program_;
  const Node& node_;
  uint32_t node_index_;
};

inline uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

using LowerFn = void (*)(Lowering&);

// Lowering functions by op kind, filled by register_builtin_ops().
struct OpRegistry {
  LowerFn lower[static_cast<size_t>(OpKind::count)] = {};
  void add(OpKind kind, LowerFn fn) { lower[static_cast<size_t>(kind)] = fn; }
};

void register_builtin_ops(OpRegistry& registry);
const OpRegistry& builtin_ops();

}  // namespace vkformer
