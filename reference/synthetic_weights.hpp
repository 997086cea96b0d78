#pragma once
// Deterministic model weights from each parameter's name and shape: the C++ twin of
// synthetic_parameter() in tests/fixtures/make_golden.py, so golden data for large models needs no
// weight files in the repository.
#include <map>
#include <string>
#include <vector>

#include "vkformer/vkformer.hpp"

namespace vkformer::ref {

HostTensor synthetic_parameter(const std::string& name, const Shape& shape);
// The paper's seq2seq model at the size `vkformer demo` runs and `make soak` repeats (2+2 layers,
// d_model 128, 4 heads, feed-forward 512, vocabularies of 1000, max_len 256), to go with these
// weights.
ModelConfig demo_seq2seq_config();
// n values uniform in [-bound, bound) from std::mt19937(seed): the demo's and the soak's inputs
// and weights of single ops.
std::vector<float> uniform_values(size_t n, float bound, uint32_t seed);
std::map<std::string, HostTensor> synthetic_weights(const ModelConfig& config);

}  // namespace vkformer::ref
