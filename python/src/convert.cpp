// numpy arrays <-> HostTensor. Arrays are copied both ways: a HostTensor owns its bytes, and a
// returned array must outlive the call that made it.
#include <cstring>
#include <vector>

#include "common.hpp"
#include "vkformer/error.hpp"

namespace vkformer::py {

namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::invalid_argument, what); }

Shape shape_of(const Array& a, const std::string& what) {
  if (a.ndim() > static_cast<size_t>(Shape::kMaxRank))
    bad(what + ": arrays of up to " + std::to_string(Shape::kMaxRank) + " dimensions, got " +
        std::to_string(a.ndim()));
  std::vector<int64_t> dims;
  for (size_t i = 0; i < a.ndim(); ++i) dims.push_back(static_cast<int64_t>(a.shape(i)));
  return Shape(dims);
}

template <class T>
std::vector<int32_t> ints(const Array& a, const std::string& what) {
  const T* p = static_cast<const T*>(a.data());
  std::vector<int32_t> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const auto v = static_cast<int64_t>(p[i]);  // every type taken here fits in int64
    if (v < INT32_MIN || v > INT32_MAX)
      bad(what + ": " + std::to_string(v) + " at flat index " + std::to_string(i) + " does not fit in int32");
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

}  // namespace

HostTensor to_host(const Array& a, const std::string& what) {
  const Shape shape = shape_of(a, what);
  const nb::dlpack::dtype t = a.dtype();
  const auto bytes = [&](size_t n) { return std::span(static_cast<const std::byte*>(a.data()), n); };
  if (t == nb::dtype<float>()) return HostTensor::from_bytes(shape, DType::f32, bytes(a.size() * 4));
  if (t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) && t.bits == 16)
    return HostTensor::from_bytes(shape, DType::f16, bytes(a.size() * 2));
  if (t == nb::dtype<double>()) {
    const double* p = static_cast<const double*>(a.data());
    std::vector<float> v(p, p + a.size());
    return HostTensor::from_f32(shape, v);
  }
  if (t == nb::dtype<int32_t>()) return HostTensor::from_bytes(shape, DType::i32, bytes(a.size() * 4));
  if (t == nb::dtype<int64_t>()) return HostTensor::from_i32(shape, ints<int64_t>(a, what));
  if (t == nb::dtype<uint32_t>()) return HostTensor::from_i32(shape, ints<uint32_t>(a, what));
  if (t == nb::dtype<int16_t>()) return HostTensor::from_i32(shape, ints<int16_t>(a, what));
  if (t == nb::dtype<uint16_t>()) return HostTensor::from_i32(shape, ints<uint16_t>(a, what));
  if (t == nb::dtype<int8_t>()) return HostTensor::from_i32(shape, ints<int8_t>(a, what));
  if (t == nb::dtype<uint8_t>() || t == nb::dtype<bool>()) return HostTensor::from_i32(shape, ints<uint8_t>(a, what));
  bad(what + ": expected a float32, float16, float64, integer or bool array, got dtype code " +
      std::to_string(t.code) + " with " + std::to_string(t.bits) + " bits");
}

HostTensor to_host_as(const Array& a, DType want, const std::string& what) {
  HostTensor h = to_host(a, what);
  if (h.dtype() == want) return h;
  if (want == DType::i32)
    bad(what + ": expected an integer (or bool) array, got " + std::string(dtype_name(h.dtype())));
  if (h.dtype() == DType::i32) {
    std::vector<float> v = h.to_f32();
    return HostTensor::from_f32(h.shape(), v, want);
  }
  return h.cast(want);
}

nb::object to_numpy(HostTensor tensor) {
  if (!is_float(tensor.dtype()) && tensor.dtype() != DType::i32)
    bad("to_numpy: " + std::string(dtype_name(tensor.dtype())) + " tensors have no numpy type");
  const nb::dlpack::dtype t =
      tensor.dtype() == DType::f16   ? nb::dlpack::dtype{static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1}
      : tensor.dtype() == DType::i32 ? nb::dtype<int32_t>()
                                     : nb::dtype<float>();
  std::vector<size_t> shape;
  for (int64_t d : tensor.shape().dims()) shape.push_back(static_cast<size_t>(d));
  // The array views the tensor's bytes; the capsule frees them with the array.
  auto* owned = new HostTensor(std::move(tensor));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<HostTensor*>(p); });
  nb::ndarray<nb::numpy> array(owned->data(), shape.size(), shape.data(), owner, nullptr, t);
  return nb::cast(array, nb::rv_policy::reference);
}

}  // namespace vkformer::py
