#include "io_util.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "file_access.hpp"
#include "utf8_path.hpp"
#include "vkformer/half.hpp"

namespace vkformer::io {

std::string quote_name(std::string_view s, size_t max_chars) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  size_t n = std::min(s.size(), max_chars);
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c >= 0x80 && utf8_sequence_length(s.substr(0, n), i) > 0) {
      size_t len = utf8_sequence_length(s.substr(0, n), i);
      out.append(s.substr(i, len));
      i += len - 1;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  out += '\'';
  if (s.size() > max_chars) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = at(i);
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2, cp = c & 0x1fu;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3, cp = c & 0x0fu;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4, cp = c & 0x07u;
  } else {
    return 0;  // a continuation byte, an overlong lead (c0, c1) or beyond U+10FFFF (f5..ff)
  }
  if (s.size() - i < len) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((at(i + k) & 0xc0u) != 0x80u) return 0;
    cp = (cp << 6) | (at(i + k) & 0x3fu);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0;  // overlong
  if (cp >= 0xd800 && cp <= 0xdfff) return 0;                            // a surrogate
  if (cp > 0x10ffff) return 0;
  return len;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8_sequence_length(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void check_tensor_bytes(const HostTensor& t, const std::string& what) {
  const auto want = dtype_bytes(t.dtype(), t.numel());
  if (t.nbytes() != want)
    fail(ErrorCode::invalid_argument,
         what + ": the " + std::string(dtype_name(t.dtype())) + " tensor of shape " +
             t.shape().str() + " holds " + std::to_string(t.nbytes()) + " bytes, not " +
             std::to_string(want) + " (a default-constructed HostTensor?)");
}

std::string index_string(const Shape& shape, uint64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()));
  for (int a = shape.rank() - 1; a >= 0; --a) {
    auto d = static_cast<uint64_t>(shape[a]);
    idx[static_cast<size_t>(a)] = d ? static_cast<int64_t>(flat % d) : 0;
    flat = d ? flat / d : 0;
  }
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(idx[i]);
  }
  return s + "]";
}

// ------------------------------------------------------------------------------- FileBytes

namespace {

using platform::FileKind;

// A path for a message, as UTF-8 on every platform.
std::string label_of(const std::filesystem::path& path) { return platform::path_to_utf8(path); }

[[noreturn]] void fail_not_regular(const std::string& label, FileKind kind) {
  fail(ErrorCode::io, label + ": is " + platform::describe(kind) + ", not a regular file");
}

}  // namespace

void check_regular_file(const std::filesystem::path& path) {
  const platform::PathStatus st = platform::path_status(path, /*follow_links=*/true);
  if (!st.error.empty()) fail(ErrorCode::io, label_of(path) + ": cannot access: " + st.error);
  if (st.kind == FileKind::missing)
    fail(ErrorCode::io, quote_name(label_of(path), 4096) + " does not exist");
  if (st.kind != FileKind::regular) fail_not_regular(label_of(path), st.kind);
}

void check_output_path(const std::filesystem::path& path, const std::string& what) {
  const platform::PathStatus st = platform::path_status(path, /*follow_links=*/false);
  // Absent or unreachable: opening will say why.
  if (st.kind == FileKind::missing || st.kind == FileKind::regular) return;
  if (st.kind == FileKind::symbolic_link)
    fail(ErrorCode::io, what + ": " + label_of(path) +
                            " is a symbolic link; vkformer does not write through links (it "
                            "would replace the link with a file): give the path it points to");
  fail(ErrorCode::io, what + ": " + label_of(path) + " is " + platform::describe(st.kind) +
                          ", not a regular file; vkformer writes only regular files");
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  return platform::same_file(a, b);
}

FileBytes FileBytes::open(const std::filesystem::path& path, bool try_map, uint64_t max_bytes) {
  const std::string label = label_of(path);
  std::string why;
  // Opening does not wait on a FIFO (it is rejected below).
  platform::ReadOnlyFile f = platform::ReadOnlyFile::open(path, &why);
  if (!f.is_open()) fail(ErrorCode::io, label + ": cannot open: " + why);
  FileKind kind = FileKind::other;
  uint64_t file_size = 0;
  if (!f.status(&kind, &file_size, &why)) fail(ErrorCode::io, label + ": cannot stat: " + why);
  if (kind != FileKind::regular) fail_not_regular(label, kind);
  if (file_size > std::numeric_limits<size_t>::max() / 2)
    fail(ErrorCode::io, label + ": file size " + std::to_string(file_size) + " is not supported");
  if (file_size > max_bytes)
    fail(ErrorCode::io, label + ": " + std::to_string(file_size) + " bytes, more than the " +
                            std::to_string(max_bytes) + " this file may have");
  const auto size = static_cast<size_t>(file_size);

  FileBytes out;
  if (try_map && size > 0) {
    if (const void* p = f.map(size)) {
      out.map_ = p;
      out.map_size_ = size;
      out.file_ = std::make_unique<platform::ReadOnlyFile>(std::move(f));
      return out;
    }
    // Mapping fails on some file systems and for some special files: read instead.
  }
  try {
    out.owned_.resize(size);
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::out_of_memory,
         label + ": cannot allocate " + std::to_string(size) + " bytes to read the file");
  }
  size_t done = 0;
  while (done < size) {
    const int64_t r = f.read_at(out.owned_.data() + done, size - done, done, &why);
    if (r < 0) fail(ErrorCode::io, label + ": read failed: " + why);
    if (r == 0)
      fail(ErrorCode::io, label + ": the file shrank while being read (" + std::to_string(done) +
                              " of " + std::to_string(size) + " bytes)");
    done += static_cast<size_t>(r);
  }
  return out;
}

FileBytes FileBytes::from_vector(std::vector<std::byte> bytes) {
  FileBytes out;
  out.owned_ = std::move(bytes);
  return out;
}

FileBytes::FileBytes() = default;
FileBytes::FileBytes(FileBytes&& o) noexcept { *this = std::move(o); }

FileBytes& FileBytes::operator=(FileBytes&& o) noexcept {
  if (this != &o) {
    platform::ReadOnlyFile::unmap(map_, map_size_);
    map_ = std::exchange(o.map_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
    owned_ = std::move(o.owned_);
    file_ = std::move(o.file_);
  }
  return *this;
}

FileBytes::~FileBytes() { platform::ReadOnlyFile::unmap(map_, map_size_); }

void FileBytes::read_at(uint64_t offset, std::span<std::byte> out, const std::string& label) const {
  const uint64_t n = out.size();
  if (offset > size() || n > size() - offset)
    fail(ErrorCode::internal, label + ": a read of " + std::to_string(n) + " bytes at byte " +
                                  std::to_string(offset) + " is beyond the file's " +
                                  std::to_string(size()) + " bytes");
  if (n == 0) return;
  if (!file_) {
    std::memcpy(out.data(), owned_.data() + offset, n);
    return;
  }
  uint64_t done = 0;
  std::string why;
  while (done < n) {
    const int64_t r = file_->read_at(out.data() + done, n - done, offset + done, &why);
    if (r < 0) fail(ErrorCode::io, label + ": read failed at byte " + std::to_string(offset + done) + ": " + why);
    if (r == 0) {
      FileKind kind = FileKind::other;
      uint64_t now = offset + done;
      file_->status(&kind, &now, &why);
      fail(ErrorCode::io, label + ": the file changed while loading: it now has " + std::to_string(now) +
                              " bytes but had " + std::to_string(size()) + " when it was opened (reading " +
                              std::to_string(n) + " bytes at byte " + std::to_string(offset) +
                              "); was it truncated or rewritten in place? Write a new file and rename it "
                              "over the old one instead");
    }
    done += static_cast<uint64_t>(r);
  }
}

std::vector<std::byte> FileBytes::read_at(uint64_t offset, uint64_t n, const std::string& label) const {
  std::vector<std::byte> out;
  try {
    out.resize(n);
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::out_of_memory, label + ": cannot allocate " + std::to_string(n) + " bytes to read");
  }
  read_at(offset, out, label);
  return out;
}

namespace {
std::function<void(const std::filesystem::path&)>& opened_hook() {
  static std::function<void(const std::filesystem::path&)> hook;
  return hook;
}
}  // namespace

void set_opened_hook_for_tests(std::function<void(const std::filesystem::path&)> hook) {
  opened_hook() = std::move(hook);
}

void run_opened_hook(const std::filesystem::path& path) {
  if (opened_hook()) opened_hook()(path);
}

// ------------------------------------------------------------------------------- OutputFile

OutputFile::OutputFile(const std::filesystem::path& path, std::string what)
    : path_(path), what_(std::move(what)) {
  static std::atomic<unsigned> counter{0};
  temp_ = path;
  check_output_path(path, what_);
  temp_ += ".tmp-vkformer-" + std::to_string(platform::process_id()) + "-" +
           std::to_string(counter++);
  std::string why;
  file_ = platform::create_new_file(temp_, &why);
  if (!file_)
    fail(ErrorCode::io, what_ + ": cannot open " + label_of(path) + " for writing: " + why);
}

OutputFile::~OutputFile() {
  if (file_) {
    std::fclose(file_);
    std::error_code ec;
    std::filesystem::remove(temp_, ec);
  }
}

void OutputFile::write(const void* data, size_t n) {
  if (n == 0) return;
  if (std::fwrite(data, 1, n, file_) != n)
    fail(ErrorCode::io,
         what_ + ": writing " + label_of(path_) + " failed: " + std::strerror(errno));
}

void OutputFile::close() {
  std::FILE* f = std::exchange(file_, nullptr);
  std::string why;
  if (std::fclose(f) != 0) why = std::strerror(errno);
  if (why.empty()) platform::rename_replacing(temp_, path_, &why);
  if (!why.empty()) {
    std::error_code ec;
    std::filesystem::remove(temp_, ec);
    fail(ErrorCode::io, what_ + ": writing " + label_of(path_) + " failed: " + why);
  }
}

// ------------------------------------------------------------------------------- decoding

namespace {

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void ints_to_i32(const std::byte* src, size_t n, int32_t* out, const Shape& shape,
                 const std::string& context) {
  for (size_t i = 0; i < n; ++i) {
    T v = load<T>(src + i * sizeof(T));
    if constexpr (!std::in_range<int32_t>(std::numeric_limits<T>::min()) ||
                  !std::in_range<int32_t>(std::numeric_limits<T>::max())) {
      if (!std::in_range<int32_t>(v))
        fail(ErrorCode::format, context + ": value " + std::to_string(v) + " at index " +
                                    index_string(shape, i) + " does not fit in int32");
    }
    out[i] = static_cast<int32_t>(v);
  }
}

// Calls sink(i, float) for every element of a float type.
template <class Sink>
void for_each_float(const std::byte* src, size_t n, ElemType type, Sink&& sink) {
  switch (type) {
    case ElemType::f16:
      for (size_t i = 0; i < n; ++i) sink(i, half_to_float(load<uint16_t>(src + 2 * i)));
      break;
    case ElemType::bf16:
      for (size_t i = 0; i < n; ++i) sink(i, bfloat16_to_float(load<uint16_t>(src + 2 * i)));
      break;
    case ElemType::f32:
      for (size_t i = 0; i < n; ++i) sink(i, load<float>(src + 4 * i));
      break;
    case ElemType::f64:
      // Rounded to the nearest float; for an f16 target rounded once more.
      for (size_t i = 0; i < n; ++i) sink(i, static_cast<float>(load<double>(src + 8 * i)));
      break;
    default: break;
  }
}

}  // namespace

HostTensor decode_elements(std::span<const std::byte> src, ElemType type, const Shape& shape,
                           DType target, const std::string& context) {
  const auto n = static_cast<size_t>(shape.numel());
  if (!convertible(type, target) || src.size() != n * elem_size(type))
    fail(ErrorCode::internal, context + ": decode_elements called with a mismatched buffer");
  HostTensor t(shape, target);
  if (n == 0) return t;
  const std::byte* in = src.data();
  std::byte* out = t.data();
  if ((type == ElemType::f32 && target == DType::f32) ||
      (type == ElemType::f16 && target == DType::f16) ||
      (type == ElemType::i32 && target == DType::i32)) {
    std::memcpy(out, in, src.size());
    return t;
  }
  if (target == DType::f32) {
    auto* o = reinterpret_cast<float*>(out);
    for_each_float(in, n, type, [o](size_t i, float v) { o[i] = v; });
    return t;
  }
  if (target == DType::f16) {
    auto* o = reinterpret_cast<uint16_t*>(out);
    for_each_float(in, n, type, [o](size_t i, float v) { o[i] = float_to_half(v); });
    return t;
  }
  auto* o = reinterpret_cast<int32_t*>(out);
  switch (type) {
    case ElemType::i8: ints_to_i32<int8_t>(in, n, o, shape, context); break;
    case ElemType::i16: ints_to_i32<int16_t>(in, n, o, shape, context); break;
    case ElemType::i32: ints_to_i32<int32_t>(in, n, o, shape, context); break;
    case ElemType::i64: ints_to_i32<int64_t>(in, n, o, shape, context); break;
    case ElemType::u8: ints_to_i32<uint8_t>(in, n, o, shape, context); break;
    case ElemType::u16: ints_to_i32<uint16_t>(in, n, o, shape, context); break;
    case ElemType::u32: ints_to_i32<uint32_t>(in, n, o, shape, context); break;
    case ElemType::u64: ints_to_i32<uint64_t>(in, n, o, shape, context); break;
    case ElemType::boolean:
      for (size_t i = 0; i < n; ++i) o[i] = load<uint8_t>(in + i) != 0 ? 1 : 0;
      break;
    default: break;
  }
  return t;
}

std::string TextCursor::found() const {
  if (pos_ >= text_.size()) return "the end of the header";
  auto c = static_cast<unsigned char>(text_[pos_]);
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  static const char* hex = "0123456789abcdef";
  return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
}

}  // namespace vkformer::io
