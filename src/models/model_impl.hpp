#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "blocks.hpp"
#include "exclusive_use.hpp"
#include "vkformer/executor.hpp"
#include "vkformer/model.hpp"
#include "weight_store.hpp"

namespace vkformer {

namespace models {
class CachedDecoder;
}

// Named host tensors that feed one run of an executor.
using Feed = std::vector<std::pair<std::string, HostTensor>>;

class ModelImpl {
 public:
  ModelImpl(Device device, ModelConfig config, ModelOptions options);
  ~ModelImpl();

  ExclusiveUse in_use{"Model"};  // held by encode, decode, forward and generate

  // Checks `names` (name, dtype string, shape) against parameter_shapes(config), then uploads
  // each through `read` converted to the model's dtype, splitting the cross-attention projections.
  void load_weights(const std::vector<std::tuple<std::string, std::string, Shape>>& available,
                    const std::function<HostTensor(const std::string&, DType)>& read,
                    const std::string& source);

  // The executor for `key`, compiled by `build` the first time the key is seen.
  Executor& executor(const std::string& key, const std::function<Graph()>& build);
  HostTensor run(Executor& ex, const Feed& feed);

  Device device;
  ModelConfig config;
  ModelOptions options;
  models::WeightStore weights;
  std::map<std::string, std::unique_ptr<Executor>> executors;
  std::map<std::string, std::unique_ptr<models::CachedDecoder>> decoders;
  GenerationStats stats;
};

}  // namespace vkformer
