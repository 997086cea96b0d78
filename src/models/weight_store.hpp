#pragma once
#include <map>
#include <string>

#include "vkformer/device_tensor.hpp"
#include "vkformer/error.hpp"
#include "vkformer/graph.hpp"

namespace vkformer::models {

// A model's weights on the device, by PyTorch name, plus tensors derived at load time (the
// cross-attention projection split into its query and key/value rows: ".q_weight", ".q_bias",
// ".kv_weight", ".kv_bias"). Every graph of the model binds these as externals.
class WeightStore {
 public:
  void add(const std::string& name, DeviceTensor t) { tensors_[name] = std::move(t); }
  const DeviceTensor& get(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw Error(ErrorCode::internal, "model weight '" + name + "' is missing");
    return it->second;
  }
  uint64_t bytes() const {
    uint64_t n = 0;
    for (auto& [name, t] : tensors_) n += t.nbytes();
    return n;
  }

 private:
  std::map<std::string, DeviceTensor> tensors_;
};

// A store's weights as externals of one graph, each bound at its first use and the same external
// after that (the block builders' weight(name)).
class BoundWeights {
 public:
  BoundWeights(Graph& graph, const WeightStore& weights) : g_(graph), w_(weights) {}
  Tensor operator()(const std::string& name) {
    auto it = bound_.find(name);
    if (it != bound_.end()) return it->second;
    return bound_[name] = g_.external(name, w_.get(name));
  }

 private:
  Graph& g_;
  const WeightStore& w_;
  std::map<std::string, Tensor> bound_;
};

}  // namespace vkformer::models
