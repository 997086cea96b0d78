#pragma once
// What the safetensors and .npy readers and writers share: file access (mapped or read), element
// types and their conversion to vkformer dtypes, checked arithmetic, and message helpers.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/dtype.hpp"
#include "vkformer/error.hpp"
#include "vkformer/host_tensor.hpp"
#include "vkformer/shape.hpp"

namespace vkformer::platform {
class ReadOnlyFile;
}

namespace vkformer::io {

// Both formats store little-endian data, and HostTensor holds native-endian elements; every
// host with a Vulkan driver we target is little-endian, so bytes are copied as they are.
static_assert(std::endian::native == std::endian::little,
              "vkformer's file readers assume a little-endian host");

[[noreturn]] inline void fail(ErrorCode code, const std::string& message) {
  throw Error(code, message);
}

// A name from a file, quoted for a message: non-printable bytes escaped, long names shortened.
std::string quote_name(std::string_view s, size_t max_chars = 96);

// A read position in a file header's text, shared by the .npy and safetensors header parsers.
class TextCursor {
 protected:
  explicit TextCursor(std::string_view text) : text_(text) {}
  int peek() const { return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : -1; }
  void ws() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') ++pos_;
  }
  // What is at the cursor, for messages: "'x'", "byte 0x07" or "the end of the header".
  std::string found() const;

  std::string_view text_;
  size_t pos_ = 0;
};

// a * b, or false when it does not fit.
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// Throws invalid_argument unless the tensor holds exactly its shape's bytes (a default-constructed
// HostTensor holds none), so a writer never describes bytes it does not write.
void check_tensor_bytes(const HostTensor& t, const std::string& what);

// The number of bytes of the valid UTF-8 sequence at s[i] (1..4), or 0 if it is not one.
// Rejects overlong forms, surrogates and code points beyond U+10FFFF, as JSON parsers do.
size_t utf8_sequence_length(std::string_view s, size_t i);
bool is_valid_utf8(std::string_view s);

// "[1,2,0]": the multi-index of a flat row-major index, for messages.
std::string index_string(const Shape& shape, uint64_t flat);

// Throws io naming `path` unless it is a regular file after following links: "does not exist",
// "is a directory, not a regular file", "cannot access: Too many levels of symbolic links". For
// a check before the file is opened; FileBytes::open makes the same checks on what it opens.
void check_regular_file(const std::filesystem::path& path);

// Throws io naming `what` and `path` unless `path` does not exist or is a regular file. Writing
// replaces the file by a rename, which would replace a symbolic link or a device node
// (/dev/null, as root) instead of writing to it, so those are refused, as are FIFOs and
// directories.
void check_output_path(const std::filesystem::path& path, const std::string& what);

// Whether `a` and `b` are the same file (device and inode, after following links): a path, a
// link to it and a hard link all are. False when either cannot be reached.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// The bytes of a whole file: memory-mapped where possible (and asked for), read otherwise, or
// taken over from a vector. Move-only.
//
// A mapping faults (SIGBUS) when another program truncates the file in place, so the readers of
// model files (GGUF, safetensors) never read through one: they copy what they need with
// read_at(), which reads a mapped file through its still open handle, and a file that shrank
// since it was opened is an io error naming it ("changed while loading"), not a signal. bytes()
// views the mapping itself, for callers that want to read without copying and accept that.
class FileBytes {
 public:
  static constexpr uint64_t kNoLimit = UINT64_MAX;
  // Throws io when the path cannot be opened, is not a regular file (a FIFO is not waited on),
  // is larger than `max_bytes` or cannot be read.
  static FileBytes open(const std::filesystem::path& path, bool try_map,
                        uint64_t max_bytes = kNoLimit);
  static FileBytes from_vector(std::vector<std::byte> bytes);

  FileBytes();
  FileBytes(FileBytes&& o) noexcept;
  FileBytes& operator=(FileBytes&& o) noexcept;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes();

  std::span<const std::byte> bytes() const {
    return map_ ? std::span<const std::byte>(static_cast<const std::byte*>(map_), map_size_)
                : std::span<const std::byte>(owned_);
  }
  bool mapped() const { return map_ != nullptr; }
  // The file's size when it was opened.
  uint64_t size() const { return map_ ? map_size_ : owned_.size(); }

  // Copies out.size() bytes at `offset` (within size()) into `out`. For a mapped file they are
  // read from the file, not the mapping: a file that has shrunk throws io naming `label` and
  // saying it changed while loading, where the mapping would have faulted.
  void read_at(uint64_t offset, std::span<std::byte> out, const std::string& label) const;
  std::vector<std::byte> read_at(uint64_t offset, uint64_t n, const std::string& label) const;

 private:
  const void* map_ = nullptr;
  size_t map_size_ = 0;
  std::vector<std::byte> owned_;
  std::unique_ptr<platform::ReadOnlyFile> file_;  // open while mapped, for read_at
};

// Tests only: called with the path each time a GgufFile or SafetensorsFile has opened a file and
// read its header, before any tensor is read (a test truncates the file there). Empty: none.
void set_opened_hook_for_tests(std::function<void(const std::filesystem::path&)> hook);
void run_opened_hook(const std::filesystem::path& path);

// A file being written: the bytes go to a temporary file beside it, renamed over `path` by
// close(). So a failed write leaves no partial file, and a file that a SafetensorsFile still maps
// is replaced, not truncated under it (which would crash the reader with SIGBUS). An existing
// path that is not a regular file is refused (check_output_path). Every failure throws io naming
// `what` and the path.
class OutputFile {
 public:
  OutputFile(const std::filesystem::path& path, std::string what);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();
  void write(const void* data, size_t n);
  void close();

 private:
  std::filesystem::path path_, temp_;
  std::string what_;
  std::FILE* file_ = nullptr;
};

// Element types found in files, and what vkformer converts them to.
enum class ElemType { f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, boolean };

constexpr size_t elem_size(ElemType t) {
  switch (t) {
    case ElemType::i8:
    case ElemType::u8:
    case ElemType::boolean: return 1;
    case ElemType::f16:
    case ElemType::bf16:
    case ElemType::i16:
    case ElemType::u16: return 2;
    case ElemType::f32:
    case ElemType::i32:
    case ElemType::u32: return 4;
    case ElemType::f64:
    case ElemType::i64:
    case ElemType::u64: return 8;
  }
  return 0;
}

constexpr bool elem_is_float(ElemType t) {
  return t == ElemType::f16 || t == ElemType::bf16 || t == ElemType::f32 || t == ElemType::f64;
}

// F16 stays f16; other floats become f32; integers and bool become i32.
constexpr DType natural_dtype(ElemType t) {
  if (t == ElemType::f16) return DType::f16;
  return elem_is_float(t) ? DType::f32 : DType::i32;
}

// Whether `t` can be read as `target` (floats as f32/f16, integers and bool as i32).
constexpr bool convertible(ElemType t, DType target) {
  return elem_is_float(t) ? is_float(target) : target == DType::i32;
}

// Converts shape.numel() elements of type `type` at `src` (src.size() must be exactly their
// size) to a HostTensor of `target`. Integers outside int32 throw format with `context`, the
// value and its index. The pair must be convertible().
HostTensor decode_elements(std::span<const std::byte> src, ElemType type, const Shape& shape,
                           DType target, const std::string& context);

}  // namespace vkformer::io
