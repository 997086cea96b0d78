#pragma once
// The safetensors header: a small JSON reader that knows the schema, so no document tree is
// built: memory stays proportional to the tensors listed, nesting is bounded (in fields it
// skips), and every error carries the header byte where it was found.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io_util.hpp"
#include "vkformer/io.hpp"

namespace vkformer::io {

// The reference implementation's limit; a larger header is corrupt, not a model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeInfo {
  std::string_view name;
  unsigned bits;                 // per element
  std::optional<ElemType> elem;  // empty: listed, but vkformer cannot convert it
};

// The dtype named in a header, or nullptr for a name the specification does not have.
const DTypeInfo* find_dtype(std::string_view name);

// Validates the whole header `text` of a file whose data buffer has `data_size` bytes: every
// field, dtype and shape (rank <= 4, size == byte range), the ranges covering the buffer exactly
// (no overlap, gap or trailing bytes, as the reference implementation requires), no duplicate
// names. Throws ErrorCode::format naming `label` and the byte.
void parse_header(std::string_view text, const std::string& label, uint64_t data_size,
                  std::vector<SafetensorsEntry>* entries, std::map<std::string, std::string>* metadata);

}  // namespace vkformer::io
