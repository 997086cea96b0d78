#pragma once
#include <memory>

#include "vkformer/dtype.hpp"
#include "vkformer/shape.hpp"

namespace vkformer {

struct Allocation;

// A tensor resident in device memory, sub-allocated from one of the device's large blocks.
// Shared ownership: the memory returns to the device when the last copy is gone.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(std::shared_ptr<Allocation> allocation, Shape shape, DType dtype)
      : allocation_(std::move(allocation)), shape_(shape), dtype_(dtype) {}

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  size_t nbytes() const { return static_cast<size_t>(dtype_bytes(dtype_, shape_.numel())); }
  bool valid() const { return allocation_ != nullptr; }
  const std::shared_ptr<Allocation>& allocation() const { return allocation_; }

 private:
  std::shared_ptr<Allocation> allocation_;
  Shape shape_;
  DType dtype_ = DType::f32;
};

}  // namespace vkformer
