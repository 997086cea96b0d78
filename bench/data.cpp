#include "data.hpp"

#include <cstring>

#include "vkformer/half.hpp"

namespace vkformer::bench {

namespace {

// SplitMix64: fast, and each element depends only on (seed, index).
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

HostTensor random_host(const Shape& shape, DType dtype, uint64_t seed, float lo, float hi) {
  HostTensor t(shape, dtype);
  const int64_t n = t.numel();
  const uint64_t base = mix(seed);
  const float span = hi - lo;
  auto value = [&](int64_t i) {
    return lo + span * static_cast<float>(mix(base + static_cast<uint64_t>(i)) >> 40) * 0x1p-24f;
  };
  if (dtype == DType::f32) {
    auto* p = reinterpret_cast<float*>(t.data());
    for (int64_t i = 0; i < n; ++i) p[i] = value(i);
  } else if (dtype == DType::f16) {
    auto* p = reinterpret_cast<uint16_t*>(t.data());
    for (int64_t i = 0; i < n; ++i) p[i] = float_to_half(value(i));
  } else {
    auto* p = reinterpret_cast<int32_t*>(t.data());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(value(i));
  }
  return t;
}

DeviceTensor random_device(Device& device, const Shape& shape, DType dtype, uint64_t seed,
                           float lo, float hi) {
  return device.upload(random_host(shape, dtype, seed, lo, hi));
}

}  // namespace vkformer::bench
