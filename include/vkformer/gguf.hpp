#pragma once
// GGUF, llama.cpp's model format (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), and
// the block layouts of ggml's tensor types.
//
// A GGUF file: "GGUF", a u32 version (2 or 3; little-endian only), u64 tensor and key counts,
// the metadata (key, value type, value), the tensor infos (name, dims, ggml type, offset), then,
// at the next multiple of general.alignment (default 32), the data section the offsets point
// into. Like the other readers (vkformer/io.hpp), GgufFile validates everything when it opens a
// file, and any input, however corrupt, gives a file or a vkformer::Error: ErrorCode::io when it
// cannot be read, ErrorCode::format naming the file and the key or tensor when its content is
// inconsistent. Never a crash or an allocation larger than the file warrants.
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/host_tensor.hpp"
#include "vkformer/shape.hpp"

namespace vkformer {

// ------------------------------------------------------------------------------- ggml types
// ggml's tensor element types, numbered as in ggml.h (the numbers are what GGUF stores).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};

// A type's block layout: `block_size` consecutive elements of a row are stored in `block_bytes`
// bytes (1 and the element size for the plain types). A row's length must be a multiple of
// block_size. What a device kernel needs to address a quantized row.
struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // as ggml writes it: "Q4_1", "F32"
  uint32_t block_size;    // elements per block
  uint32_t block_bytes;   // bytes per block
  bool dequantizable;     // dequantize_row() converts it
};

// Every type ggml defines today, in number order.
std::span<const GgmlTypeInfo> ggml_types();
// The type with this number, or nullptr for a number ggml does not define (never did, or removed).
const GgmlTypeInfo* find_ggml_type(uint32_t number);
const GgmlTypeInfo& ggml_type_info(GgmlType type);  // throws invalid_argument for a bad value
std::string_view ggml_type_name(GgmlType type);
// "ggml type 4 (Q4_2, removed from ggml)" / "ggml type 77 (unknown)": why a number is refused.
std::string describe_ggml_type_number(uint32_t number);

// The bytes of a row of `n` elements. Throws invalid_argument unless n is a multiple of the
// block size.
uint64_t ggml_row_bytes(GgmlType type, uint64_t n);

// Converts one row (or several, back to back) to f32 with exactly ggml's arithmetic (fp16
// scales widened to f32, then f32 products: Q8_0 d*q, Q4_0 d*(q-8), Q4_1 d*q+m with the low
// nibbles holding the first 16 elements of a block, ...; products are rounded before sums, never
// fused). dst.size() elements, a multiple of the block size; src must hold exactly their bytes.
// Types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K;
// another throws format naming it. Size mismatches throw invalid_argument.
void dequantize_row(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

// The vkformer dtype that holds a ggml type's blocks unchanged: F32, F16, BF16, I32 and the
// quantized types of vkformer/quant_types.def. Another type throws format naming it ("ggml type
// Q2_K has no vkformer dtype ...").
DType dtype_from_ggml(GgmlType type);
// The reverse, for every dtype (i32 is I32).
GgmlType ggml_type_of(DType dtype);
// "F32, F16, BF16, Q8_0, ... or Q6_K": the ggml types of weights vkformer reads, for errors.
const char* ggml_weight_type_names();

// ------------------------------------------------------------------------------- GGUF values
enum class GgufValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8,
  array = 9, u64 = 10, i64 = 11, f64 = 12,
};
// The specification's names: "uint8", "int32", "float32", "bool", "string", "array", ...
std::string_view gguf_type_name(GgufValueType type);

// One metadata value, viewing the file's bytes (valid while its GgufFile lives). Typed access
// throws format unless the value has a fitting type, naming `context` and both types.
class GgufValue {
 public:
  GgufValueType type() const { return type_; }
  bool is_array() const { return type_ == GgufValueType::array; }
  bool is_integer() const;  // u8 .. i64
  bool is_float() const { return type_ == GgufValueType::f32 || type_ == GgufValueType::f64; }

  // Scalars. as_int / as_uint take any integer type (and fail when the value does not fit);
  // as_float takes float32 and float64.
  std::string_view as_string(std::string_view context = "value") const;
  int64_t as_int(std::string_view context = "value") const;
  uint64_t as_uint(std::string_view context = "value") const;
  double as_float(std::string_view context = "value") const;
  bool as_bool(std::string_view context = "value") const;

  // Arrays: their element type and length (throw unless an array).
  GgufValueType array_type(std::string_view context = "value") const;
  uint64_t size(std::string_view context = "value") const;
  // The elements, by element type: strings; integers (any integer type); floats (float32 and
  // float64); nested arrays.
  const std::vector<std::string_view>& as_strings(std::string_view context = "value") const;
  std::vector<int64_t> as_ints(std::string_view context = "value") const;
  std::vector<double> as_floats(std::string_view context = "value") const;
  const std::vector<GgufValue>& as_arrays(std::string_view context = "value") const;
  // The little-endian element bytes of an array of numbers or bools (size() * element size).
  std::span<const std::byte> array_bytes(std::string_view context = "value") const;

  // For people: "uint32 30", "string 'llama'", "array of 49152 string".
  std::string describe() const;

 private:
  friend class GgufParser;
  GgufValueType type_ = GgufValueType::u8;
  GgufValueType elem_type_ = GgufValueType::u8;  // arrays
  uint64_t bits_ = 0;                            // scalars, zero-extended little-endian bytes
  std::string_view str_;                         // strings
  uint64_t count_ = 0;                           // arrays
  std::span<const std::byte> raw_;               // arrays of numbers and bools
  std::vector<std::string_view> strings_;        // arrays of strings
  std::vector<GgufValue> arrays_;                // arrays of arrays
};

struct GgufKeyValue {
  std::string_view key;
  GgufValue value;
};

// One tensor, as its info describes it (already validated).
struct GgufTensorInfo {
  std::string name;
  uint32_t n_dims = 0;                  // 0..4
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // ggml order: ne[0] is the row length (innermost)
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // within the data section, a multiple of the alignment
  uint64_t numel = 0;
  uint64_t nbytes = 0;
  uint64_t row_length() const { return ne[0]; }
  uint64_t rows() const { return numel / ne[0]; }
  // Row-major (outermost first, as vkformer's Shape): ne reversed, rank n_dims.
  Shape shape() const;
};

class GgufFile {
 public:
  // As SafetensorsFile::Access: map the file (falls back to reading it), or read it. A mapped
  // file's header is read into memory and its tensors are copied out of the file by read_f32,
  // read_raw and dequantize_rows: a file truncated meanwhile is an io error ("changed while
  // loading"), never a fault; only tensor_bytes() views the mapping.
  enum class Access { map, read };
  // Opens the file and validates the header, every key and value, and every tensor info: a
  // known ggml type, 1..4 dims, none 0, no overflowing element count, a row length that is a
  // multiple of the block size, an aligned offset, the data inside the file and overlapping no
  // other tensor's, no duplicate keys or names, a power-of-two general.alignment.
  explicit GgufFile(const std::filesystem::path& path, Access access = Access::map);
  static GgufFile from_bytes(std::vector<std::byte> bytes, std::string label = "<memory>");

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& label() const;
  bool memory_mapped() const;
  uint32_t version() const;
  uint64_t alignment() const;    // general.alignment, or 32
  uint64_t data_offset() const;  // where the data section starts in the file

  // Metadata in file order.
  const std::vector<GgufKeyValue>& metadata() const;
  const GgufValue* find(std::string_view key) const;  // nullptr if absent
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // The value; a missing key throws format naming the file and the key.
  const GgufValue& value(std::string_view key) const;
  // Typed access by key; a missing key or a value of another type throws format naming the
  // file, the key and both types.
  std::string_view get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::vector<std::string_view>& get_strings(std::string_view key) const;
  std::vector<int64_t> get_ints(std::string_view key) const;
  std::vector<double> get_floats(std::string_view key) const;
  // The same with a default for a missing key (a present key of another type still throws).
  std::string_view get_string_or(std::string_view key, std::string_view fallback) const;
  uint64_t get_uint_or(std::string_view key, uint64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;

  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent
  const GgufTensorInfo& tensor(std::string_view name) const;  // throws format naming it
  // The tensor's bytes as stored, valid while this object lives (for Access::map, a view of the
  // mapping, which faults if the file is truncated in place).
  std::span<const std::byte> tensor_bytes(const GgufTensorInfo& t) const;
  // Rows [first, first + count) of the tensor (ne[0] elements each) as f32. A type
  // dequantize_row cannot convert throws format naming the tensor and its type.
  std::vector<float> dequantize_rows(const GgufTensorInfo& t, uint64_t first, uint64_t count) const;
  // The whole tensor as f32, with shape().
  HostTensor read_f32(std::string_view name) const;
  // The whole tensor in its stored type (dtype_from_ggml), bytes copied unchanged, with shape()
  // (ne reversed, so rows are the last dim). A type with no vkformer dtype throws format naming
  // the tensor and its type.
  HostTensor read_raw(std::string_view name) const;

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  const Impl& impl() const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vkformer
