#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "vkformer/dtype.hpp"
#include "vkformer/shape.hpp"

namespace vkformer {

// A tensor in host memory: shape, dtype and contiguous row-major bytes.
class HostTensor {
 public:
  HostTensor() = default;
  // Zero-filled. A quantized dtype needs a last dim that is a multiple of 32 (whole blocks).
  HostTensor(Shape shape, DType dtype);

  // from_f32 converts to f32, f16, bf16 (round to nearest even) or i32; quantizing is not done
  // here (quantized data comes from GGUF files through from_bytes).
  static HostTensor from_f32(Shape shape, std::span<const float> values, DType dtype = DType::f32);
  static HostTensor from_i32(Shape shape, std::span<const int32_t> values);
  // Raw bytes in the dtype's layout (for the quantized types, ggml blocks; rows = the last dim).
  // bytes.size() must be dtype_bytes(dtype, shape.numel()).
  static HostTensor from_bytes(Shape shape, DType dtype, std::span<const std::byte> bytes);

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return bytes_.size(); }
  std::byte* data() { return bytes_.data(); }
  const std::byte* data() const { return bytes_.data(); }

  // Element values converted to float (f16/bf16 widened, i32 cast, quantized blocks dequantized
  // with ggml's arithmetic).
  std::vector<float> to_f32() const;
  std::vector<int32_t> to_i32() const;  // only for i32 tensors

  // This tensor with another float dtype (f32, f16, from bf16 or a quantized type too); a copy if
  // the dtype is the same.
  HostTensor cast(DType to) const;
  // Same bytes, other shape with the same number of elements (quantized: the last dim stays a
  // multiple of 32).
  HostTensor reshaped(Shape shape) const;

  float f32_at(int64_t flat_index) const;

 private:
  Shape shape_;
  DType dtype_ = DType::f32;
  std::vector<std::byte> bytes_;
};

}  // namespace vkformer
