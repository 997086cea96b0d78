// The KV caches' storage types read back in double, as ggml's block layouts say (q8_0: an f16
// scale d and 32 int8 codes, value d * q; q4_0: d and 32 nibbles, value d * (q - 8)), rope and
// the attention rotation's Walsh-Hadamard product in double: the references of the tests of the
// caches (kv_quant_test, kv_shift_test, kv_rotation_test).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "vkformer/half.hpp"
#include "vkformer/dtype.hpp"

namespace vkformer::testing {

// The f16 value at p (a block's scale, an f16 cache's element).
inline double half_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}

// Elements 0..n-1 of `type` stored in `bytes`, in double.
inline std::vector<double> dequantize(DType type, const std::byte* bytes, size_t n) {
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (type == DType::f32) {
      float f;
      std::memcpy(&f, bytes + 4 * i, 4);
      out[i] = f;
    } else if (type == DType::f16) {
      out[i] = half_at(bytes + 2 * i);
    } else if (type == DType::q8_0) {
      const std::byte* b = bytes + i / 32 * 34;
      out[i] = half_at(b) * static_cast<double>(static_cast<int8_t>(b[2 + i % 32]));
    } else {
      const std::byte* b = bytes + i / 32 * 18;
      const auto byte = static_cast<unsigned>(b[2 + i % 16]);
      const unsigned q = i % 32 < 16 ? byte & 15u : byte >> 4;
      out[i] = half_at(b) * (static_cast<double>(q) - 8.0);
    }
  }
  return out;
}

// The quantization step (the scale d) of element i's block; 0 for the float types.
inline double block_step(DType type, const std::byte* bytes, size_t i) {
  if (type == DType::q8_0) return std::abs(half_at(bytes + i / 32 * 34));
  if (type == DType::q4_0) return std::abs(half_at(bytes + i / 32 * 18));
  return 0.0;
}

// x times the orthonormal Walsh-Hadamard matrix per block of n (0: x itself):
// y[i] = sum_j (-1)^popcount(i & j) x[j] / sqrt(n) within each block.
inline std::vector<double> hadamard_blocks(std::vector<double> x, int n) {
  if (n == 0) return x;
  std::vector<double> y(x.size());
  for (size_t first = 0; first < x.size(); first += static_cast<size_t>(n))
    for (int i = 0; i < n; ++i) {
      double acc = 0.0;
      for (int j = 0; j < n; ++j)
        acc += (__builtin_popcount(static_cast<unsigned>(i & j)) & 1 ? -1.0 : 1.0) * x[first + static_cast<size_t>(j)];
      y[first + static_cast<size_t>(i)] = acc / std::sqrt(static_cast<double>(n));
    }
  return y;
}

// Rope's parameters for rope_row: a row's first `dims` values (-1: all) in pairs (2i, 2i + 1), or
// (i, i + dims / 2) for NeoX, the pair i turned by pos * base^(-2i / dims) * scale / factors[i].
struct RopeRow {
  bool neox = false;
  double base = 10000.0, scale = 1.0;
  int64_t dims = -1;
  std::vector<float> factors;  // Llama 3's per-pair frequency factors (empty: none)
};

// x (one head's row) rotated to position `pos` (possibly negative) as rope computes it, in double.
inline std::vector<double> rope_row(std::vector<double> x, double pos, const RopeRow& r) {
  const int64_t dims = r.dims < 0 ? static_cast<int64_t>(x.size()) : r.dims;
  for (int64_t i = 0; i < dims / 2; ++i) {
    const size_t a = static_cast<size_t>(r.neox ? i : 2 * i), b = static_cast<size_t>(r.neox ? i + dims / 2 : 2 * i + 1);
    double inv = std::pow(r.base, -2.0 * static_cast<double>(i) / static_cast<double>(dims)) * r.scale;
    if (!r.factors.empty()) inv /= r.factors[static_cast<size_t>(i)];
    const double th = pos * inv, xa = x[a], xb = x[b];
    x[a] = xa * std::cos(th) - xb * std::sin(th);
    x[b] = xa * std::sin(th) + xb * std::cos(th);
  }
  return x;
}

}  // namespace vkformer::testing
