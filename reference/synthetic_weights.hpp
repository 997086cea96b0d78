#pragma once
// Deterministic model weights from each parameter's name and shape: the C++ twin of
// synthetic_parameter() in tools/make_golden.py, so golden data for large models needs no
// weight files in the repository.
#include <map>
#include <string>

#include "vkformer/vkformer.hpp"

namespace vkformer::ref {

HostTensor synthetic_parameter(const std::string& name, const Shape& shape);
std::map<std::string, HostTensor> synthetic_weights(const ModelConfig& config);

}  // namespace vkformer::ref
