#pragma once
// Typed access to the keys of a tokenizer's JSON files: a missing or mistyped key is a format
// Error naming the file and the key's path ("tokenizer.json: model.vocab: ...").
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace vkformer::text {

using json = nlohmann::json;

// A tokenizer's files are at most this large: a big multilingual tokenizer.json is ~20 MB.
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{256} << 20;
// Arrays and objects nest at most this deep: tokenizer.json nests fewer than 10 levels, and
// copying or printing a value recurses once per level.
inline constexpr int kMaxJsonNesting = 64;

// The whole file parsed: io when it is not a regular file of at most kMaxTokenizerFileBytes or
// cannot be read (a FIFO is not waited on), format when it is not JSON or nests too deep.
json read_json_file(const std::filesystem::path& path);

// A value from a file for a message, never printed whole (it may be huge or deeply nested):
// strings quoted and cut short, arrays and objects by their size, other scalars as written.
std::string describe(const json& v);
// A string from a file (a token, a key) quoted for a message and cut short.
std::string quote_text(std::string_view s);

class JsonKeys {
 public:
  // `file` names the source in messages; `path` is where `object` sits in it ("" for the root).
  JsonKeys(const json& object, std::string file, std::string path);

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  std::string key_path(const std::string& key) const;

  bool has(const std::string& key) const;            // present and not null
  const json& object(const std::string& key) const;  // required
  const json& array(const std::string& key) const;   // required
  JsonKeys child(const std::string& key) const {
    return JsonKeys(object(key), file_, key_path(key));
  }
  std::string string(const std::string& key, std::optional<std::string> fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::optional<bool> optional_boolean(const std::string& key) const;  // null or absent: unset
  int64_t integer(const std::string& key, std::optional<int64_t> fallback, int64_t lo,
                  int64_t hi) const;

  const json& value() const { return object_; }
  const std::string& file() const { return file_; }

 private:
  const json& object_;
  std::string file_, path_;
};

}  // namespace vkformer::text
