#pragma once
// Random benchmark data with fixed seeds: the same bytes on every device and every run, so
// results are comparable (values matter: zeros make some GPUs draw less power and run faster).
#include <cstdint>

#include "vkformer/device.hpp"
#include "vkformer/host_tensor.hpp"

namespace vkformer::bench {

// Uniform in [lo, hi), from a counter-based generator seeded with `seed`.
HostTensor random_host(const Shape& shape, DType dtype, uint64_t seed, float lo = -1.0f,
                       float hi = 1.0f);
// A weight in a ggml block dtype (q4_1, q4_k, ...): random quantized values with small random
// block scales, so it looks like a model's (|w| up to ~0.1). In quant.cpp.
HostTensor random_quantized(const Shape& shape, DType dtype, uint64_t seed);
DeviceTensor random_device(Device& device, const Shape& shape, DType dtype, uint64_t seed,
                           float lo = -1.0f, float hi = 1.0f);

}  // namespace vkformer::bench
