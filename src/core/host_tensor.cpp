#include "vkformer/host_tensor.hpp"

#include <cstring>
#include <new>
#include <stdexcept>

#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/half.hpp"

namespace vkformer {

namespace {

// Zeroed bytes for a tensor; a failed allocation is an Error that says how much was asked for.
std::vector<std::byte> allocate_bytes(const Shape& shape, DType dtype) {
  if (is_quantized(dtype) && (shape.rank() == 0 || shape.back() % dtype_block_elements(dtype) != 0))
    throw Error(ErrorCode::shape_mismatch,
                "HostTensor " + shape.str() + " " + std::string(dtype_name(dtype)) +
                    ": a quantized tensor's last dim must be a multiple of " +
                    std::to_string(dtype_block_elements(dtype)) + " (whole blocks)");
  const auto bytes = static_cast<size_t>(dtype_bytes(dtype, shape.numel()));
  try {
    return std::vector<std::byte>(bytes);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  throw Error(ErrorCode::out_of_memory, "HostTensor " + shape.str() + " " +
                                            std::string(dtype_name(dtype)) + ": cannot allocate " +
                                            std::to_string(bytes) + " bytes of host memory");
}

float element_as_f32(const std::byte* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f32: return reinterpret_cast<const float*>(data)[i];
    case DType::f16: return half_to_float(reinterpret_cast<const uint16_t*>(data)[i]);
    case DType::i32: return static_cast<float>(reinterpret_cast<const int32_t*>(data)[i]);
    case DType::bf16: return bfloat16_to_float(reinterpret_cast<const uint16_t*>(data)[i]);
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) case DType::name:
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
    {
      // Dequantize the element's block, exactly as to_f32 does.
      const int64_t per = dtype_block_elements(dtype);
      float block[256];
      dequantize_row(ggml_type_of(dtype),
                     std::span<const std::byte>(data + (i / per) * dtype_block_bytes(dtype),
                                                dtype_block_bytes(dtype)),
                     std::span<float>(block, static_cast<size_t>(per)));
      return block[i % per];
    }
  }
  return 0;
}

}  // namespace

HostTensor::HostTensor(Shape shape, DType dtype)
    : shape_(shape), dtype_(dtype), bytes_(allocate_bytes(shape, dtype)) {}

static void check_count(const Shape& shape, size_t n, const char* what) {
  if (static_cast<int64_t>(n) != shape.numel())
    throw Error(ErrorCode::shape_mismatch, std::string(what) + ": shape " + shape.str() + " has " +
                                               std::to_string(shape.numel()) + " elements, got " +
                                               std::to_string(n) + " values");
}

HostTensor HostTensor::from_f32(Shape shape, std::span<const float> values, DType dtype) {
  check_count(shape, values.size(), "HostTensor::from_f32");
  HostTensor t(shape, dtype);
  switch (dtype) {
    case DType::f32:
      if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * 4);
      break;
    case DType::f16: {
      auto* out = reinterpret_cast<uint16_t*>(t.data());
      for (size_t i = 0; i < values.size(); ++i) out[i] = float_to_half(values[i]);
      break;
    }
    case DType::i32: {
      auto* out = reinterpret_cast<int32_t*>(t.data());
      for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<int32_t>(values[i]);
      break;
    }
    case DType::bf16: {
      auto* out = reinterpret_cast<uint16_t*>(t.data());
      for (size_t i = 0; i < values.size(); ++i) out[i] = float_to_bfloat16(values[i]);
      break;
    }
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) case DType::name:
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
      throw Error(ErrorCode::unsupported,
                  "HostTensor::from_f32: vkformer does not quantize to " +
                      std::string(dtype_name(dtype)) +
                      " (read quantized weights from a GGUF file, or use HostTensor::from_bytes)");
  }
  return t;
}

HostTensor HostTensor::from_bytes(Shape shape, DType dtype, std::span<const std::byte> bytes) {
  HostTensor t(shape, dtype);
  if (bytes.size() != t.nbytes())
    throw Error(ErrorCode::shape_mismatch,
                "HostTensor::from_bytes: " + shape.str() + " " + std::string(dtype_name(dtype)) +
                    " takes " + std::to_string(t.nbytes()) + " bytes, got " +
                    std::to_string(bytes.size()));
  if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

HostTensor HostTensor::from_i32(Shape shape, std::span<const int32_t> values) {
  check_count(shape, values.size(), "HostTensor::from_i32");
  HostTensor t(shape, DType::i32);
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * 4);
  return t;
}

float HostTensor::f32_at(int64_t i) const {
  // Also past the bytes held: a default-constructed tensor has shape [] (one element) but none.
  const int64_t held = static_cast<int64_t>(bytes_.size() / dtype_block_bytes(dtype_)) *
                       dtype_block_elements(dtype_);
  if (i < 0 || i >= held)
    throw Error(ErrorCode::invalid_argument,
                "HostTensor::f32_at: index " + std::to_string(i) + " is outside a tensor of " +
                    std::to_string(held) + " elements (" + shape_.str() + ")");
  return element_as_f32(bytes_.data(), dtype_, i);
}

std::vector<float> HostTensor::to_f32() const {
  std::vector<float> v(static_cast<size_t>(numel()));
  if (dtype_ == DType::f32) {
    if (!v.empty()) std::memcpy(v.data(), bytes_.data(), bytes_.size());
  } else if (is_quantized(dtype_)) {
    if (!v.empty()) dequantize_row(ggml_type_of(dtype_), bytes_, v);
  } else {
    for (int64_t i = 0; i < numel(); ++i) v[i] = element_as_f32(bytes_.data(), dtype_, i);
  }
  return v;
}

std::vector<int32_t> HostTensor::to_i32() const {
  if (dtype_ != DType::i32)
    throw Error(ErrorCode::invalid_argument,
                "HostTensor::to_i32 on a " + std::string(dtype_name(dtype_)) + " tensor");
  std::vector<int32_t> v(static_cast<size_t>(numel()));
  if (!v.empty()) std::memcpy(v.data(), bytes_.data(), bytes_.size());
  return v;
}

HostTensor HostTensor::cast(DType to) const {
  if (to == dtype_) return *this;
  if (!(is_float(to) || to == DType::bf16) || !(is_float(dtype_) || is_weight_type(dtype_)))
    throw Error(ErrorCode::invalid_argument, "HostTensor::cast from " +
                                                 std::string(dtype_name(dtype_)) + " to " +
                                                 std::string(dtype_name(to)) + " is not supported");
  auto values = to_f32();
  return from_f32(shape_, values, to);
}

HostTensor HostTensor::reshaped(Shape shape) const {
  if (shape.numel() != shape_.numel())
    throw Error(ErrorCode::shape_mismatch,
                "reshape " + shape_.str() + " to " + shape.str() + ": element counts differ");
  if (is_quantized(dtype_) && (shape.rank() == 0 || shape.back() % dtype_block_elements(dtype_)))
    throw Error(ErrorCode::shape_mismatch,
                "reshape " + std::string(dtype_name(dtype_)) + " " + shape_.str() + " to " +
                    shape.str() + ": the last dim must stay a multiple of 32 (whole blocks)");
  HostTensor t = *this;
  t.shape_ = shape;
  return t;
}

}  // namespace vkformer
