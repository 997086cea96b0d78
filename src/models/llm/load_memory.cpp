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

// Bytes per value of a cache type, blocks' scales included (q8_0: 34 bytes for 32 values).
double value_bytes(DType t) { return static_cast<double>(dtype_bytes(t, 32)) / 32; }

}  // namespace

LoadMemory load_memory(const GgufFile& file, const LanguageModelConfig& c, const LoadOptions& o, int64_t context) {
  LoadMemory m;
  for (const GgufTensorInfo& t : file.tensors()) m.weights += t.nbytes;
  m.kv_per_row = static_cast<uint64_t>(c.n_layers * o.kv_batches * c.n_kv_heads) *
                 (dtype_bytes(cache_type_k(o), c.head_dim) + dtype_bytes(cache_type_v(o), c.head_dim));
  m.context = context;
  m.extra_rows = o.prompt_chunk;
  m.head_dim = c.head_dim;
  m.kv_value_bytes = value_bytes(cache_type_k(o)) + value_bytes(cache_type_v(o));
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
    // Smaller cache types, each offered where it holds more than the context already offered:
    // f16 caches (half of f32's), then q8_0 (34 bytes per 32 values; llama.cpp's layout, about
    // +0.03% perplexity on SmolLM2: bench/RESULTS.md).
    const double now = need.kv_value_bytes;  // 0 when unknown: nothing offered
    auto fits_as = [&](DType t) -> int64_t {
      const double per_value = 2 * value_bytes(t);
      if (now <= per_value) return 0;
      return context_fitting(room - need.weights, need,
                             static_cast<uint64_t>(static_cast<double>(need.kv_per_row) * per_value / now));
    };
    const int64_t fits_f16 = fits_as(DType::f16);
    const int64_t fits_q8 = need.head_dim > 0 && need.head_dim % 32 == 0 ? fits_as(DType::q8_0) : 0;
    msg += "Try ";
    if (fits > 0) msg += "a context of " + std::to_string(fits) + " tokens or less, ";
    if (fits_f16 > fits)
      msg += "f16 KV caches (--cache-type-k f16 --cache-type-v f16: " + std::to_string(fits_f16) + " tokens), ";
    if (fits_q8 > std::max(fits, fits_f16))
      msg += "q8_0 KV caches (--cache-type-k q8_0 --cache-type-v q8_0: " + std::to_string(fits_q8) + " tokens), ";
    msg += "or another device";
  }
  throw Error(ErrorCode::out_of_memory, msg + " (" + e.what() + ")");
}

}  // namespace vkformer::models::llm
