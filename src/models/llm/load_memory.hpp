#pragma once
// What a decoder-only model needs of device memory, for the error of a load that runs out of it:
// how much was needed, how much the device has, and what would fit (a smaller context, a smaller
// KV cache type, another device).
#include <cstdint>
#include <string>

#include "vkformer/llm.hpp"
#include "vkformer/device.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer::models::llm {

struct LoadOptions;  // llm/loaded_model.hpp

struct LoadMemory {
  uint64_t weights = 0;      // the file's tensor bytes: the device keeps them in their stored types
  uint64_t kv_per_row = 0;   // K and V bytes of one cache row, over every block and sequence
  int64_t context = 0;       // tokens the caches hold
  int64_t extra_rows = 0;    // rows beyond the context (a prompt chunk's padding)
  int64_t head_dim = 0;      // q8_0/q4_0 caches need whole 32-value blocks per head (0: not offered)
  double kv_value_bytes = 0; // bytes of one K value plus one V value in the caches' types
  uint64_t kv_cache() const { return kv_per_row * static_cast<uint64_t>(context + extra_rows); }
};

LoadMemory load_memory(const GgufFile& file, const LanguageModelConfig& config, const LoadOptions& options,
                       int64_t context);

// The longest context whose caches (need.kv_per_row a row) the device's memory would hold once
// loaded, `caches_held` bytes of them being held now with everything else vkformer holds
// (KvCacheInfo::context_that_fits).
int64_t context_that_fits(const Device& device, const LoadMemory& need, uint64_t caches_held);

// `e` (out_of_memory, thrown while loading or compiling the model) again, prefixed by `what`
// ("LanguageModel::load"), with LoadMemory's numbers, the device's device-local memory and what
// to try. Call it once this load's own allocations are freed: what vkformer still holds on the
// device then belongs to other models.
[[noreturn]] void rethrow_out_of_memory(const Device& device, const LoadMemory& need, const LoadOptions& options,
                                        const std::string& what, const Error& e);

}  // namespace vkformer::models::llm
