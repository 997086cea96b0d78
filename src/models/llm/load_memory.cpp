#include "llm/load_memory.hpp"

#include <algorithm>
#include <cstdio>

#include "device_impl.hpp"
#include "llm/loaded_model.hpp"

namespace vkformer::models::llm {

namespace {

std::string size_text(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  else if (bytes >= (1ull << 20) || bytes == 0)
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1ull << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  return buf;
}

// The largest context whose caches fit `room` bytes, rounded down to a multiple of 256 tokens
// where it is that large (a number a person would pick); 0 if none does.
int64_t context_fitting(uint64_t room, const LoadMemory& need, uint64_t kv_per_row) {
  if (kv_per_row == 0) return need.context;
  const int64_t rows = static_cast<int64_t>(room / kv_per_row) - need.extra_rows;
  if (rows < 1) return 0;
  const int64_t n = std::min(rows, need.context);
  return n >= 256 ? n / 256 * 256 : n;
}

}  // namespace

LoadMemory load_memory(const GgufFile& file, const LanguageModelConfig& c, const LoadOptions& o, int64_t context) {
  LoadMemory m;
  for (const GgufTensorInfo& t : file.tensors()) m.weights += t.nbytes;
  m.kv_per_row = static_cast<uint64_t>(c.n_layers * o.kv_batches * c.n_kv_heads) *
                 (dtype_bytes(cache_type_k(o), c.head_dim) + dtype_bytes(cache_type_v(o), c.head_dim));
  m.context = context;
  m.extra_rows = o.prompt_chunk;
  return m;
}

int64_t context_that_fits(const Device& device, const LoadMemory& need, uint64_t caches_held) {
  const DeviceInfo& info = device.info();
  const uint64_t held = device.impl().allocator().device_bytes_in_use();
  uint64_t has = info.device_local_memory_bytes;
  if (const uint64_t budget = device.impl().allocator().budget()) has = std::min(has, budget);
  const uint64_t others = held > caches_held ? held - caches_held : 0;
  if (has <= others || need.kv_per_row == 0) return 0;
  const int64_t rows = static_cast<int64_t>((has - others) / need.kv_per_row) - need.extra_rows;
  if (rows < 1) return 0;
  return rows >= 256 ? rows / 256 * 256 : rows;
}

void rethrow_out_of_memory(const Device& device, const LoadMemory& need, const LoadOptions& o,
                           const std::string& what, const Error& e) {
  const DeviceInfo& info = device.info();
  const uint64_t held = device.impl().allocator().device_bytes_in_use();
  uint64_t has = info.device_local_memory_bytes;
  if (const uint64_t budget = device.impl().allocator().budget()) has = std::min(has, budget);
  const uint64_t room = has > held ? has - held : 0;

  std::string msg = what + ": out of device memory: the model needs " + size_text(need.weights) +
                    " for its weights and " + size_text(need.kv_cache()) + " for its KV cache (a context of " +
                    std::to_string(need.context) + " tokens, K in " + std::string(dtype_name(cache_type_k(o))) +
                    ", V in " + std::string(dtype_name(cache_type_v(o))) +
                    "), plus its activations; device '" + info.name + "' has " + size_text(has) +
                    (has < info.device_local_memory_bytes ? " (VKFORMER_DEVICE_MEMORY_BUDGET)" : "") +
                    " of device-local memory" +
                    (held ? ", of which vkformer holds " + size_text(held) + " for other work" : "") + ". ";
  if (need.weights + need.kv_cache() <= room) {
    msg += "That would fit, so other programs hold the memory: try again once they free it, or another device";
  } else if (need.weights >= room) {
    msg += "The weights alone do not fit: try a more quantized file of this model, or another device";
  } else {
    const int64_t fits = context_fitting(room - need.weights, need, need.kv_per_row);
    const int64_t fits_f16 = cache_type_k(o) == DType::f32 && cache_type_v(o) == DType::f32
                                 ? context_fitting(room - need.weights, need, need.kv_per_row / 2)
                                 : 0;
    msg += "Try ";
    if (fits > 0) msg += "a context of " + std::to_string(fits) + " tokens or less, ";
    if (fits_f16 > fits) msg += "f16 activations (a KV cache half the size: " + std::to_string(fits_f16) + " tokens), ";
    msg += "or another device";
  }
  throw Error(ErrorCode::out_of_memory, msg + " (" + e.what() + ")");
}

}  // namespace vkformer::models::llm
