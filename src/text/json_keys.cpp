#include "json_keys.hpp"

#include "../io/io_util.hpp"
#include "vkformer/error.hpp"

namespace vkformer::text {

json read_json_file(const std::filesystem::path& path) {
  // Read, not mapped: a file truncated while mapped would end the process with SIGBUS.
  io::FileBytes file = io::FileBytes::open(path, false, kMaxTokenizerFileBytes);
  const auto* begin = reinterpret_cast<const char*>(file.bytes().data());
  const auto* end = begin + file.bytes().size();
  // nlohmann parses with an explicit stack, but what is parsed is then copied and freed
  // recursively, so the depth is limited as it is parsed.
  struct TooDeep {};
  auto limit_depth = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start ||
         event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonNesting)
      throw TooDeep{};
    return true;
  };
  try {
    return json::parse(begin, end, limit_depth);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::format, path.string() + ": not valid JSON: " + e.what());
  } catch (const TooDeep&) {
    throw Error(ErrorCode::format, path.string() + ": arrays and objects nested more than " +
                                       std::to_string(kMaxJsonNesting) +
                                       " deep; a tokenizer's files nest fewer than 10 levels");
  }
}

std::string describe(const json& v) {
  auto count = [](size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  if (v.is_string()) return quote_text(v.get_ref<const std::string&>());
  if (v.is_array()) return "an array of " + count(v.size(), "element", "elements");
  if (v.is_object()) return "an object of " + count(v.size(), "key", "keys");
  return v.dump();  // a number, true, false or null: short
}

std::string quote_text(std::string_view s) { return io::quote_name(s, 64); }

JsonKeys::JsonKeys(const json& object, std::string file, std::string path)
    : object_(object), file_(std::move(file)), path_(std::move(path)) {
  if (!object_.is_object())
    throw Error(ErrorCode::format, file_ + ": " + (path_.empty() ? "the top level" : path_) +
                                       ": expected an object, got " + object_.type_name());
}

std::string JsonKeys::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void JsonKeys::fail(const std::string& key, const std::string& what) const {
  throw Error(ErrorCode::format, file_ + ": " + key_path(key) + ": " + what);
}

bool JsonKeys::has(const std::string& key) const {
  auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

const json& JsonKeys::object(const std::string& key) const {
  if (!has(key)) fail(key, "missing");
  const json& v = object_.at(key);
  if (!v.is_object()) fail(key, std::string("expected an object, got ") + v.type_name());
  return v;
}

const json& JsonKeys::array(const std::string& key) const {
  if (!has(key)) fail(key, "missing");
  const json& v = object_.at(key);
  if (!v.is_array()) fail(key, std::string("expected an array, got ") + v.type_name());
  return v;
}

std::string JsonKeys::string(const std::string& key, std::optional<std::string> fallback) const {
  if (!has(key)) {
    if (!fallback) fail(key, "missing");
    return *fallback;
  }
  const json& v = object_.at(key);
  if (!v.is_string()) fail(key, std::string("expected a string, got ") + v.type_name());
  return v.get<std::string>();
}

bool JsonKeys::boolean(const std::string& key, bool fallback) const {
  return optional_boolean(key).value_or(fallback);
}

std::optional<bool> JsonKeys::optional_boolean(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  const json& v = object_.at(key);
  if (!v.is_boolean()) fail(key, "expected true, false or null, got " + describe(v));
  return v.get<bool>();
}

int64_t JsonKeys::integer(const std::string& key, std::optional<int64_t> fallback, int64_t lo,
                          int64_t hi) const {
  if (!has(key)) {
    if (!fallback) fail(key, "missing");
    return *fallback;
  }
  const json& v = object_.at(key);
  if (!v.is_number_integer()) fail(key, "expected an integer, got " + describe(v));
  bool in_range;
  if (v.is_number_unsigned()) {  // may exceed int64_t
    auto u = v.get<uint64_t>();
    in_range = u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo));
  } else {
    in_range = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  }
  if (!in_range)
    fail(key, v.dump() + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
  return v.get<int64_t>();
}

}  // namespace vkformer::text
