// libFuzzer harness: GGUF bytes -> GgufFile::from_bytes, then every metadata value through each
// accessor and every tensor's bytes and rows. A vkformer::Error is the expected answer to a
// broken file; a crash, a sanitizer report, a leak, any other exception or a broken invariant
// (a tensor the index does not find, bytes outside the file or overlapping) is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace {

void touch(const vkformer::GgufValue& v) {
  using vkformer::Error;
  (void)v.describe();
  auto quiet = [](auto&& f) {
    try {
      f();
    } catch (const Error&) {
    }
  };
  quiet([&] { (void)v.as_string(); });
  quiet([&] { (void)v.as_int(); });
  quiet([&] { (void)v.as_uint(); });
  quiet([&] { (void)v.as_float(); });
  quiet([&] { (void)v.as_bool(); });
  quiet([&] { (void)v.as_strings(); });
  quiet([&] { (void)v.as_ints(); });
  quiet([&] { (void)v.as_floats(); });
  quiet([&] { (void)v.array_bytes(); });
  quiet([&] {
    for (const vkformer::GgufValue& item : v.as_arrays()) touch(item);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkformer;
  const auto* p = reinterpret_cast<const std::byte*>(data);
  try {
    GgufFile file = GgufFile::from_bytes(std::vector<std::byte>(p, p + size), "fuzz");
    if (file.alignment() == 0 || (file.alignment() & (file.alignment() - 1)) != 0) __builtin_trap();
    if (file.data_offset() % file.alignment() != 0) __builtin_trap();
    for (const GgufKeyValue& kv : file.metadata()) {
      if (file.find(kv.key) != &kv.value) __builtin_trap();  // keys are unique and indexed
      touch(kv.value);
    }
    // No two tensors overlap.
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const GgufTensorInfo& t : file.tensors()) ranges.emplace_back(t.offset, t.offset + t.nbytes);
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i - 1].second > ranges[i].first) __builtin_trap();
    for (const GgufTensorInfo& t : file.tensors()) {
      if (file.find_tensor(t.name) != &t) __builtin_trap();
      const auto bytes = file.tensor_bytes(t);
      if (bytes.size() != t.nbytes || t.numel == 0 || t.n_dims > 4) __builtin_trap();
      if (file.data_offset() + t.offset + t.nbytes > size) __builtin_trap();
      if (!ggml_type_info(t.type).dequantizable) continue;
      std::vector<float> rows = file.dequantize_rows(t, 0, t.rows());
      if (rows.size() != t.numel) __builtin_trap();
      HostTensor all = file.read_f32(t.name);
      if (static_cast<uint64_t>(all.numel()) != t.numel) __builtin_trap();
    }
  } catch (const Error&) {
  }
  return 0;
}
