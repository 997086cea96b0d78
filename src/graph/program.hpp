#pragma once
// A graph lowered to kernel dispatches over values: what the executor plans memory for,
// binds and records.
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "kernel_table.hpp"
#include "pipeline_cache.hpp"
#include "vkformer/device_tensor.hpp"
#include "vkformer/host_tensor.hpp"

namespace vkformer {

constexpr uint32_t kNoValue = UINT32_MAX;

enum class ValueKind : uint8_t {
  input,       // written from staging at the start of every run
  constant,    // uploaded once at compile time
  external,    // a DeviceTensor owned by the caller
  activation,  // planned in the activation arena
};

struct ValueDesc {
  Shape shape;
  DType dtype = DType::f32;
  ValueKind kind = ValueKind::activation;
  uint32_t alias_of = kNoValue;  // views and pinned outputs share their root's bytes
  uint64_t alias_offset = 0;     // a view's first byte within alias_of's bytes
  // Whole 32-bit words: kernels that read weights (shaders/weights.glsl) load 18- and 34-byte
  // ggml blocks and odd counts of 16-bit values as words, and a binding that ends mid-word would
  // hide the last halfword (robust access reads it as 0). Device tensors are sized likewise.
  uint64_t bytes() const { return (dtype_bytes(dtype, shape.numel()) + 3) / 4 * 4; }
};

// A dispatch binds values in order: binding i of the kernel is bindings[i].
struct Binding {
  uint32_t value = kNoValue;
  bool write = false;  // the kernel may write it (and may read it)
  // A window of the value's bytes (window_bytes == 0: all of them). Ops whose tensors span more
  // than one binding may (maxStorageBufferRange) bind successive windows in successive
  // dispatches (src/ops/windows.hpp).
  uint64_t window_offset = 0;
  uint64_t window_bytes = 0;
  // A gather reads only part of what it binds (an embedding's rows of its table): at most this
  // many bytes (0: all of them). Only ExecutorStats::weight_bytes_read uses it.
  uint64_t read_bytes = 0;
  uint64_t bytes(const ValueDesc& v) const { return window_bytes ? window_bytes : v.bytes(); }
};

// Push constants: a trivially copyable struct of at most 128 bytes.
struct PushBlock {
  std::array<uint32_t, vk::kMaxPushConstantBytes / 4> words{};
  uint32_t size = 0;
  template <class T>
  static PushBlock of(const T& value) {
    static_assert(sizeof(T) <= vk::kMaxPushConstantBytes, "push constants must fit in 128 bytes");
    static_assert(sizeof(T) % 4 == 0, "push constant blocks are made of 32-bit words");
    static_assert(std::is_trivially_copyable_v<T>);
    PushBlock p;
    std::memcpy(p.words.data(), &value, sizeof(T));
    p.size = sizeof(T);
    return p;
  }
};

struct Dispatch {
  const kernels::VariantEntry* kernel = nullptr;
  std::vector<uint32_t> spec;  // specialization constants: constant_id i = spec[i]
  PushBlock push;
  std::vector<Binding> bindings;
  std::array<uint32_t, 3> groups{1, 1, 1};
  uint32_t node = 0;
};

struct Program {
  // A deque so that references from Lowering::value() stay valid while a lowering adds
  // temporaries and constants (a vector would reallocate under them).
  std::deque<ValueDesc> values;
  std::vector<Dispatch> dispatches;
  std::map<uint32_t, HostTensor> constants;
  std::map<uint32_t, DeviceTensor> externals;
  std::vector<std::string> node_labels;
  // i32 graph inputs whose every entry must lie in [lo, hi), checked by Executor::set_input; `why`
  // (the op's label and its rule) completes the error message.
  struct IndexBound {
    int64_t lo = 0, hi = 0;
    std::string why;
  };
  std::map<uint32_t, std::vector<IndexBound>> index_bounds;

  uint32_t root(uint32_t v) const {
    while (values[v].alias_of != kNoValue) v = values[v].alias_of;
    return v;
  }
};

}  // namespace vkformer
