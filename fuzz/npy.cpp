// libFuzzer harness: .npy bytes -> parse_npy (what read_npy does after reading the file). A
// vkformer::Error is the expected answer to a broken file; a crash, a sanitizer report, a leak or
// any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "vkformer/error.hpp"
#include "vkformer/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkformer;
  try {
    HostTensor t = parse_npy(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
    if (t.nbytes() != static_cast<size_t>(t.numel()) * dtype_size(t.dtype())) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
