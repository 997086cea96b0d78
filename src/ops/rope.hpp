#pragma once
// What rope and rope_kv_cache share: the frequency table and the checks of RopeOptions.
#include <cstdint>
#include <string>
#include <vector>

#include "graph_impl.hpp"

namespace vkformer::ops {

// Positions stay below 2^24, where every integer is exact in fp32 (the angle is pos * inv_freq
// in fp32, as llama.cpp and PyTorch compute it).
constexpr int64_t kMaxPosition = int64_t{1} << 24;

// inv_freq[i] = freq_base^(-2i / dims) for i < dims / 2, in double rounded to fp32 (the closest
// fp32 value; llama.cpp's powf and PyTorch's float32 pow are within an ulp or two of it).
HostTensor rope_inv_freq(int64_t dims, double freq_base, double freq_scale = 1.0,
                         const std::vector<float>& freq_factors = {});

// Throws unless `options` fit rows of d columns, s rows per sequence (x describes the tensor in
// messages); returns the rotated dims (options.dims, or d for -1).
int64_t check_rope(const GraphImpl& g, const std::string& op, const std::string& x, int64_t d,
                   int64_t s, const RopeOptions& options);

}  // namespace vkformer::ops
