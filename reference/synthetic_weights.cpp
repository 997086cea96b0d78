#include "synthetic_weights.hpp"

#include <cmath>
#include <random>
#include <vector>

namespace vkformer::ref {

namespace {

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

ModelConfig demo_seq2seq_config() {
  return {.arch = ModelConfig::Arch::seq2seq, .d_model = 128, .nhead = 4, .dim_feedforward = 512,
          .num_encoder_layers = 2, .num_decoder_layers = 2, .final_norm = true, .src_vocab = 1000,
          .tgt_vocab = 1000, .max_len = 256};
}

std::vector<float> uniform_values(size_t n, float bound, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-bound, bound);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

HostTensor synthetic_parameter(const std::string& name, const Shape& shape) {
  const uint64_t seed = fnv1a64(name);
  const int64_t n = shape.numel();
  // Same rule as the Python: matrices r / sqrt(fan_in), norm weights 1 + r / 10, else r / 10.
  std::string last = name.substr(0, name.rfind('.'));
  last = last.substr(last.rfind('.') + 1);
  bool norm_weight = last.rfind("norm", 0) == 0 && name.ends_with("weight");
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double u = static_cast<double>(splitmix64(seed + static_cast<uint64_t>(i)) >> 11) * 0x1.0p-53;
    double r = 2.0 * u - 1.0;
    double x = shape.rank() == 2 ? r / std::sqrt(static_cast<double>(shape[1]))
               : norm_weight    ? 1.0 + r / 10.0
                                : r / 10.0;
    v[static_cast<size_t>(i)] = static_cast<float>(x);
  }
  return HostTensor::from_f32(shape, v);
}

std::map<std::string, HostTensor> synthetic_weights(const ModelConfig& config) {
  std::map<std::string, HostTensor> out;
  for (auto& [name, shape] : parameter_shapes(config)) out.emplace(name, synthetic_parameter(name, shape));
  return out;
}

}  // namespace vkformer::ref
