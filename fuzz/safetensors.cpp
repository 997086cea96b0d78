// libFuzzer harness: safetensors bytes -> SafetensorsFile::from_bytes, then every tensor read
// with each target dtype. A vkformer::Error is the expected answer to a broken file; a crash,
// a sanitizer report, a leak or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vkformer/error.hpp"
#include "vkformer/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkformer;
  const auto* p = reinterpret_cast<const std::byte*>(data);
  try {
    SafetensorsFile file = SafetensorsFile::from_bytes(std::vector<std::byte>(p, p + size), "fuzz");
    for (const SafetensorsEntry& e : file.entries()) {
      if (file.find(e.name) != &e) __builtin_trap();  // the index must find every entry
      if (file.bytes(e).size() != e.nbytes()) __builtin_trap();
      for (DType target : {DType::f32, DType::f16, DType::i32}) {
        try {
          HostTensor t = file.read(e.name, target);
          if (t.shape() != e.shape || t.dtype() != target) __builtin_trap();
        } catch (const Error&) {
        }
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
