// safetensors: reading (mapped or read, the whole header validated up front by
// safetensors_header.cpp) and writing.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

#include "io_util.hpp"
#include "safetensors_header.hpp"
#include "vkformer/io.hpp"

namespace vkformer {

using io::ElemType;
using io::fail;
using io::quote_name;
using io::DTypeInfo;
using io::find_dtype;
using io::kMaxHeaderBytes;

namespace {

uint64_t load_u64_le(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

// ------------------------------------------------------------------------------- reader

struct SafetensorsFile::Impl {
  std::string label;
  io::FileBytes file;
  uint64_t data_offset = 0, data_size = 0;  // the data buffer, after the header
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
  std::unordered_map<std::string_view, size_t> index;  // views into entries' names

  // A mapped file's header and tensors are copied out with read_at, never read through the
  // mapping, so a file truncated meanwhile is an error rather than a SIGBUS (io_util.hpp).
  void parse() {
    const uint64_t size = file.size();
    if (size < 8)
      fail(ErrorCode::format, label + ": " + std::to_string(size) +
                                  " bytes is too short for a safetensors file (it starts with an "
                                  "8-byte header length)");
    std::byte length[8];
    file.read_at(0, length, label);
    const uint64_t n = load_u64_le(length);
    const uint64_t rest = size - 8;
    if (n > rest)
      fail(ErrorCode::format, label + ": header length " + std::to_string(n) +
                                  " is larger than the rest of the file (" + std::to_string(rest) +
                                  " bytes): truncated, or not a safetensors file");
    if (n > kMaxHeaderBytes)
      fail(ErrorCode::format, label + ": header length " + std::to_string(n) + " exceeds the limit of " +
                                  std::to_string(kMaxHeaderBytes) + " bytes");
    std::vector<std::byte> copy;
    std::span<const std::byte> bytes = file.bytes().subspan(8, n);
    if (file.mapped()) bytes = copy = file.read_at(8, n, label);
    std::string_view header(reinterpret_cast<const char*>(bytes.data()), n);
    data_offset = 8 + n;
    data_size = size - data_offset;
    io::parse_header(header, label, data_size, &entries, &metadata);
    index.reserve(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) index.emplace(entries[i].name, i);
  }
};

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path, Access access)
    : impl_(std::make_unique<Impl>()) {
  impl_->label = path.string();
  impl_->file = io::FileBytes::open(path, access == Access::map);
  impl_->parse();
  io::run_opened_hook(path);
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<std::byte> bytes, std::string label) {
  auto impl = std::make_unique<Impl>();
  impl->label = std::move(label);
  impl->file = io::FileBytes::from_vector(std::move(bytes));
  impl->parse();
  return SafetensorsFile(std::move(impl));
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

const SafetensorsFile::Impl& SafetensorsFile::impl() const {
  if (!impl_)
    fail(ErrorCode::invalid_argument,
         "SafetensorsFile: this file was moved from; use the SafetensorsFile it was moved to");
  return *impl_;
}

const std::string& SafetensorsFile::label() const { return impl().label; }
bool SafetensorsFile::memory_mapped() const { return impl().file.mapped(); }
const std::vector<SafetensorsEntry>& SafetensorsFile::entries() const { return impl().entries; }
const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return impl().metadata;
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  const Impl& file = impl();
  auto it = file.index.find(name);
  return it == file.index.end() ? nullptr : &file.entries[it->second];
}

const SafetensorsEntry& SafetensorsFile::entry(std::string_view name) const {
  if (const auto* e = find(name)) return *e;
  fail(ErrorCode::invalid_argument, impl().label + ": no tensor named " + quote_name(name) +
                                         " (the file has " + std::to_string(impl().entries.size()) +
                                         " tensors)");
}

std::span<const std::byte> SafetensorsFile::bytes(const SafetensorsEntry& e) const {
  const Impl& file = impl();
  if (e.begin > e.end || e.end > file.data_size)
    fail(ErrorCode::invalid_argument,
         file.label + ": the entry " + quote_name(e.name) + " does not belong to this file");
  return file.file.bytes().subspan(file.data_offset + e.begin, e.end - e.begin);
}

HostTensor SafetensorsFile::read(std::string_view name, DType target) const {
  const SafetensorsEntry& e = entry(name);
  const std::string context = impl().label + ": tensor " + quote_name(e.name);
  const DTypeInfo* info = find_dtype(e.dtype);  // known: the header was validated
  if (!info || !info->elem)
    fail(ErrorCode::format, context + " has dtype " + e.dtype +
                                ", which vkformer cannot convert (it reads F64, F32, F16, BF16, "
                                "integers and BOOL)");
  if (!io::convertible(*info->elem, target))
    fail(ErrorCode::invalid_argument,
         context + " is " + e.dtype + " and cannot be read as " + std::string(dtype_name(target)) +
             (io::elem_is_float(*info->elem) ? " (read it as f32 or f16)" : " (read it as i32)"));
  std::span<const std::byte> src = bytes(e);
  std::vector<std::byte> copy;
  if (impl().file.mapped()) src = copy = impl().file.read_at(impl().data_offset + e.begin, e.nbytes(), impl().label);
  return io::decode_elements(src, *info->elem, e.shape, target, context);
}

HostTensor SafetensorsFile::read(std::string_view name) const {
  const SafetensorsEntry& e = entry(name);
  const DTypeInfo* info = find_dtype(e.dtype);
  return read(name, info && info->elem ? io::natural_dtype(*info->elem) : DType::f32);
}

// ------------------------------------------------------------------------------- writer

namespace {

void append_json_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  out += '"';
}

}  // namespace

void write_safetensors(const std::filesystem::path& path,
                       std::span<const std::pair<std::string, HostTensor>> tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string what = "write_safetensors";
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!io::is_valid_utf8(k) || !io::is_valid_utf8(v))
        fail(ErrorCode::invalid_argument,
             what + ": metadata key " + quote_name(k) + " or its value is not valid UTF-8");
      if (!first) header += ',';
      first = false;
      append_json_string(header, k);
      header += ':';
      append_json_string(header, v);
    }
    header += '}';
  }
  std::unordered_map<std::string_view, size_t> seen;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    if (name == "__metadata__")
      fail(ErrorCode::invalid_argument, what + ": '__metadata__' is reserved, not a tensor name");
    if (!io::is_valid_utf8(name))
      fail(ErrorCode::invalid_argument,
           what + ": tensor name " + quote_name(name) + " is not UTF-8");
    if (!seen.emplace(name, i).second)
      fail(ErrorCode::invalid_argument, what + ": duplicate tensor name " + quote_name(name));
    io::check_tensor_bytes(t, what + ": tensor " + quote_name(name));
    const char* dtype = t.dtype() == DType::f32 ? "F32" : t.dtype() == DType::f16 ? "F16" : "I32";
    if (header.size() > 1) header += ',';
    append_json_string(header, name);
    header += ":{\"dtype\":\"";
    header += dtype;
    header += "\",\"shape\":[";
    for (int a = 0; a < t.shape().rank(); ++a) {
      if (a) header += ',';
      header += std::to_string(t.shape()[a]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.nbytes()) + "]}";
    offset += t.nbytes();
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  io::OutputFile out(path, what);
  uint64_t n = header.size();
  out.write(&n, 8);
  out.write(header.data(), header.size());
  for (const auto& [name, t] : tensors) out.write(t.data(), t.nbytes());
  out.close();
}

}  // namespace vkformer
