#include "json_keys.hpp"

#include <fstream>
#include <sstream>

#include "vkformer/error.hpp"

namespace vkformer::text {

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::io, path.string() + ": cannot be opened");
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::io, path.string() + ": cannot be read");
  try {
    return json::parse(buf.str());
  } catch (const json::exception& e) {
    throw Error(ErrorCode::format, path.string() + ": not valid JSON: " + e.what());
  }
}

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
  if (!v.is_boolean()) fail(key, std::string("expected true, false or null, got ") + v.dump());
  return v.get<bool>();
}

int64_t JsonKeys::integer(const std::string& key, std::optional<int64_t> fallback, int64_t lo,
                          int64_t hi) const {
  if (!has(key)) {
    if (!fallback) fail(key, "missing");
    return *fallback;
  }
  const json& v = object_.at(key);
  if (!v.is_number_integer()) fail(key, "expected an integer, got " + v.dump());
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
