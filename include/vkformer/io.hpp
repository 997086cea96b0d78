#pragma once
// The file formats users bring: safetensors weights and NumPy .npy arrays.
//
// Readers validate everything before they trust it: any input, however corrupt, gives a tensor
// or a vkformer::Error (ErrorCode::io when a file cannot be opened or read, ErrorCode::format
// when its content is corrupt, truncated or of a kind vkformer cannot hold), whose message names
// the file, what is wrong and where. Never a crash, an out-of-bounds read or an allocation larger
// than the file warrants.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vkformer/dtype.hpp"
#include "vkformer/host_tensor.hpp"
#include "vkformer/shape.hpp"

namespace vkformer {

// ------------------------------------------------------------------------------- safetensors
// https://github.com/huggingface/safetensors: a little-endian u64 header length N, N bytes of
// JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data buffer. Offsets are relative to the start of the data buffer.

// One tensor of a safetensors file, as its header describes it (already validated).
struct SafetensorsEntry {
  std::string name;
  std::string dtype;   // as written in the file: "F32", "F16", "BF16", "I64", "BOOL", ...
  Shape shape;         // rank 0..4
  uint64_t begin = 0;  // byte range [begin, end) within the data buffer
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // map: memory-map the file (falls back to reading it where mapping fails); the header and
  // read() copy from the file itself, so another program truncating it in place meanwhile gives
  // an io error naming it ("changed while loading"), never a fault. Only the views bytes()
  // returns read the mapping, and fault (SIGBUS) on such a file, as any mapping does; replacing
  // it (a new file renamed over it, as write_safetensors does) is safe.
  // read: read the whole file into memory, immune to both.
  enum class Access { map, read };

  // Opens the file and validates the whole header: every field, dtype, shape (rank <= 4,
  // size == byte range), the ranges covering the data buffer exactly (no gap, overlap or trailing
  // bytes, as the reference implementation requires).
  explicit SafetensorsFile(const std::filesystem::path& path, Access access = Access::map);
  // The same from bytes in memory; `label` names them in error messages.
  static SafetensorsFile from_bytes(std::vector<std::byte> bytes, std::string label = "<memory>");

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& label() const;  // the path it was opened from
  bool memory_mapped() const;

  // Tensors in the order of the header; the "__metadata__" strings, if any.
  const std::vector<SafetensorsEntry>& entries() const;
  const std::map<std::string, std::string>& metadata() const;

  bool contains(std::string_view name) const { return find(name) != nullptr; }
  const SafetensorsEntry* find(std::string_view name) const;   // nullptr if absent
  const SafetensorsEntry& entry(std::string_view name) const;  // throws invalid_argument

  // The tensor's raw little-endian bytes, valid while this object lives (a view of the mapping
  // for Access::map: see above).
  std::span<const std::byte> bytes(const SafetensorsEntry& entry) const;

  // The tensor converted to `target`: float dtypes (F32, F16, BF16, F64) to f32 or f16 (rounded
  // to nearest even; beyond the target's range: +-inf); integer dtypes (I8..I64, U8..U64) and
  // BOOL (as 0/1) to i32, failing on a value outside int32. Other pairs throw invalid_argument;
  // dtypes vkformer cannot convert (F8_*, F4, F6_*, C64) throw format.
  HostTensor read(std::string_view name, DType target) const;
  // With the natural target: F16 -> f16, other floats -> f32, integers and BOOL -> i32.
  HostTensor read(std::string_view name) const;

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  const Impl& impl() const;  // throws on a moved-from SafetensorsFile
  std::unique_ptr<Impl> impl_;
};

// Writes f32 tensors as F32, f16 as F16 and i32 as I32, in the given order, with `metadata` as
// "__metadata__" (left out when empty). The header is padded with spaces to a multiple of 8.
// Duplicate or reserved names throw invalid_argument; failing writes throw io. The file is
// written beside `path` and renamed over it, so a failed write leaves no partial file and a
// SafetensorsFile still mapping the old file keeps reading it.
void write_safetensors(const std::filesystem::path& path,
                       std::span<const std::pair<std::string, HostTensor>> tensors,
                       const std::map<std::string, std::string>& metadata = {});

// ------------------------------------------------------------------------------- NumPy .npy
// Format versions 1.0, 2.0 and 3.0, C order, little-endian (or byte-order-free) data.

// Reads '<f4' as f32, '<f2' as f16, '<f8' as f32 (rounded; beyond float's range: +-inf), and the
// integer types '<i8', '<i4', '<i2', '|i1', '<u8', '<u4', '<u2', '|u1' and bool '|b1' (as 0/1)
// as i32, failing on a value outside int32 with its index. Rank 0..4 (a 0-d array is a scalar, Shape{}). Big-endian data,
// fortran_order True (rank >= 2) and a data size other than the shape's are format errors.
HostTensor read_npy(const std::filesystem::path& path);
// The same from bytes in memory; `label` names them in error messages.
HostTensor parse_npy(std::span<const std::byte> bytes, std::string_view label = "<memory>");

// The element type written. automatic: f32 -> '<f4', f16 -> '<f2', i32 -> '<i8'. Float tensors
// can be written as float32 or float16; i32 tensors as int64, int32 or boolean (nonzero -> True).
enum class NpyType { automatic, float32, float16, int64, int32, boolean };

// Writes format version 1.0 with NumPy's own header layout (padded to 64 bytes). A type that
// does not fit the tensor's dtype throws invalid_argument; failing writes throw io.
void write_npy(const std::filesystem::path& path, const HostTensor& tensor,
               NpyType type = NpyType::automatic);

}  // namespace vkformer
