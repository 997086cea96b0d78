// GGUF reading: the whole header (metadata and tensor infos) is parsed and validated when the
// file is opened; values stay views into the header's bytes (read into memory, or the whole file
// read), and tensors are copied out of the file when asked for (FileBytes::read_at).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "io_util.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer {

using io::fail;
using io::quote_name;

namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 8;           // arrays of arrays; ggml's own reader allows none
constexpr uint64_t kMaxKeyBytes = 65535;    // the specification's limit
constexpr uint64_t kMaxTensorNameBytes = 64;  // the specification's limit (ggml: GGML_MAX_NAME)
// The smallest a key-value pair (key length, empty key, type, a 1-byte value) and a tensor info
// (name length, empty name, n_dims 0, type, offset) can be: a count beyond remaining / this is
// a corrupt count, refused before anything is reserved for it.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

size_t value_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean: return 1;
    case GgufValueType::u16:
    case GgufValueType::i16: return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32: return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64: return 8;
    case GgufValueType::string:
    case GgufValueType::array: return 0;
  }
  return 0;
}

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::u16:
    case GgufValueType::i16:
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::u64:
    case GgufValueType::i64: return true;
    default: return false;
  }
}

bool is_signed_type(GgufValueType t) {
  return t == GgufValueType::i8 || t == GgufValueType::i16 || t == GgufValueType::i32 ||
         t == GgufValueType::i64;
}

// The integer in the first value_size(t) bytes of `bits`, sign-extended for signed types; a
// uint64 above INT64_MAX is reported through *big.
int64_t integer_of(uint64_t bits, GgufValueType t, bool* negative) {
  int64_t v = 0;
  switch (t) {
    case GgufValueType::i8: v = static_cast<int8_t>(bits); break;
    case GgufValueType::i16: v = static_cast<int16_t>(bits); break;
    case GgufValueType::i32: v = static_cast<int32_t>(bits); break;
    case GgufValueType::i64: v = static_cast<int64_t>(bits); break;
    default: *negative = false; return static_cast<int64_t>(bits);  // caller checks the range
  }
  *negative = v < 0;
  return v;
}

double float_of(uint64_t bits, GgufValueType t) {
  if (t == GgufValueType::f32) {
    float f;
    auto b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

uint64_t load_bits(const std::byte* p, size_t n) {
  uint64_t v = 0;
  std::memcpy(&v, p, n);  // little-endian host (io_util.hpp)
  return v;
}

std::string format_double(double d) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", d);
  return buf;
}

}  // namespace

std::string_view gguf_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::u8: return "uint8";
    case GgufValueType::i8: return "int8";
    case GgufValueType::u16: return "uint16";
    case GgufValueType::i16: return "int16";
    case GgufValueType::u32: return "uint32";
    case GgufValueType::i32: return "int32";
    case GgufValueType::f32: return "float32";
    case GgufValueType::boolean: return "bool";
    case GgufValueType::string: return "string";
    case GgufValueType::array: return "array";
    case GgufValueType::u64: return "uint64";
    case GgufValueType::i64: return "int64";
    case GgufValueType::f64: return "float64";
  }
  return "unknown";
}

// ------------------------------------------------------------------------------- GgufValue

namespace {

std::string type_phrase(const GgufValue& v) {
  if (v.is_array())
    return "an array of " + std::to_string(v.size()) + " " +
           std::string(gguf_type_name(v.array_type()));
  const std::string_view name = gguf_type_name(v.type());
  return (name[0] == 'i' ? "an " : "a ") + std::string(name);
}

[[noreturn]] void type_error(const GgufValue& v, std::string_view context, std::string_view expected) {
  fail(ErrorCode::format, std::string(context) + " is " + type_phrase(v) + ", expected " +
                              std::string(expected));
}

}  // namespace

bool GgufValue::is_integer() const { return is_integer_type(type_); }

std::string_view GgufValue::as_string(std::string_view context) const {
  if (type_ != GgufValueType::string) type_error(*this, context, "a string");
  return str_;
}

int64_t GgufValue::as_int(std::string_view context) const {
  if (!is_integer()) type_error(*this, context, "an integer");
  bool negative;
  int64_t v = integer_of(bits_, type_, &negative);
  if (type_ == GgufValueType::u64 && bits_ > static_cast<uint64_t>(INT64_MAX))
    fail(ErrorCode::format, std::string(context) + " is " + std::to_string(bits_) +
                                ", beyond the int64 range");
  return v;
}

uint64_t GgufValue::as_uint(std::string_view context) const {
  if (!is_integer()) type_error(*this, context, "an unsigned integer");
  bool negative;
  int64_t v = integer_of(bits_, type_, &negative);
  if (negative)
    fail(ErrorCode::format, std::string(context) + " is " + std::to_string(v) +
                                " (" + std::string(gguf_type_name(type_)) + "), expected a value >= 0");
  return is_signed_type(type_) ? static_cast<uint64_t>(v) : bits_;
}

double GgufValue::as_float(std::string_view context) const {
  if (!is_float()) type_error(*this, context, "a float32 or float64");
  return float_of(bits_, type_);
}

bool GgufValue::as_bool(std::string_view context) const {
  if (type_ != GgufValueType::boolean) type_error(*this, context, "a bool");
  return bits_ != 0;
}

GgufValueType GgufValue::array_type(std::string_view context) const {
  if (!is_array()) type_error(*this, context, "an array");
  return elem_type_;
}

uint64_t GgufValue::size(std::string_view context) const {
  if (!is_array()) type_error(*this, context, "an array");
  return count_;
}

const std::vector<std::string_view>& GgufValue::as_strings(std::string_view context) const {
  if (!is_array() || elem_type_ != GgufValueType::string)
    type_error(*this, context, "an array of string");
  return strings_;
}

std::vector<int64_t> GgufValue::as_ints(std::string_view context) const {
  if (!is_array() || !is_integer_type(elem_type_))
    type_error(*this, context, "an array of integers");
  const size_t n = value_size(elem_type_);
  std::vector<int64_t> out;
  out.reserve(count_);
  for (uint64_t i = 0; i < count_; ++i) {
    const uint64_t bits = load_bits(raw_.data() + i * n, n);
    bool negative;
    const int64_t v = integer_of(bits, elem_type_, &negative);
    if (elem_type_ == GgufValueType::u64 && bits > static_cast<uint64_t>(INT64_MAX))
      fail(ErrorCode::format, std::string(context) + ": element " + std::to_string(i) + " is " +
                                  std::to_string(bits) + ", beyond the int64 range");
    out.push_back(v);
  }
  return out;
}

std::vector<double> GgufValue::as_floats(std::string_view context) const {
  if (!is_array() || (elem_type_ != GgufValueType::f32 && elem_type_ != GgufValueType::f64))
    type_error(*this, context, "an array of float32 or float64");
  const size_t n = value_size(elem_type_);
  std::vector<double> out;
  out.reserve(count_);
  for (uint64_t i = 0; i < count_; ++i)
    out.push_back(float_of(load_bits(raw_.data() + i * n, n), elem_type_));
  return out;
}

const std::vector<GgufValue>& GgufValue::as_arrays(std::string_view context) const {
  if (!is_array() || elem_type_ != GgufValueType::array)
    type_error(*this, context, "an array of arrays");
  return arrays_;
}

std::span<const std::byte> GgufValue::array_bytes(std::string_view context) const {
  if (!is_array() || value_size(elem_type_) == 0)
    type_error(*this, context, "an array of numbers or bools");
  return raw_;
}

std::string GgufValue::describe() const {
  const std::string type(gguf_type_name(type_));
  if (is_array()) return "array of " + std::to_string(count_) + " " + std::string(gguf_type_name(elem_type_));
  if (type_ == GgufValueType::string) return type + " " + quote_name(str_);
  if (type_ == GgufValueType::boolean) return type + (bits_ ? " true" : " false");
  if (is_float()) return type + " " + format_double(float_of(bits_, type_));
  bool negative;
  const int64_t v = integer_of(bits_, type_, &negative);
  return type + " " + (is_signed_type(type_) ? std::to_string(v) : std::to_string(bits_));
}

Shape GgufTensorInfo::shape() const {
  std::vector<int64_t> dims;
  for (uint32_t i = n_dims; i-- > 0;) dims.push_back(static_cast<int64_t>(ne[i]));
  return Shape(dims);
}

// ------------------------------------------------------------------------------- parser

class GgufParser {
 public:
  // `bytes` are the file's first bytes, `file_size` of them or fewer: a parse that needs more
  // throws NeedMore with how many (GgufFile reads a mapped file's header into memory in steps).
  GgufParser(std::span<const std::byte> bytes, uint64_t file_size, const std::string& label)
      : b_(bytes), size_(file_size), label_(label) {}

  struct NeedMore {
    uint64_t bytes;
  };

  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<GgufKeyValue> metadata;
  std::unordered_map<std::string_view, size_t> key_index;
  std::vector<GgufTensorInfo> tensors;

  void parse() {
    parse_header();
    for (uint64_t i = 0; i < n_kv_; ++i) parse_kv(i);
    context_ = Ctx::none;
    if (auto it = key_index.find("general.alignment"); it != key_index.end()) {
      const GgufValue& v = metadata[it->second].value;
      if (v.type() != GgufValueType::u32)
        fail(ErrorCode::format, label_ + ": key 'general.alignment' is " + type_phrase(v) +
                                    ", expected a uint32");
      alignment = v.bits_;
      if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        fail(ErrorCode::format, label_ + ": key 'general.alignment' is " +
                                    std::to_string(alignment) + ", not a power of two");
    }
    std::unordered_map<std::string_view, size_t> names;
    tensors.reserve(n_tensors_);
    for (uint64_t i = 0; i < n_tensors_; ++i) parse_tensor_info(i, &names);
    context_ = Ctx::none;
    // pos_ <= size and alignment <= 2^31: no overflow.
    data_offset = (pos_ + alignment - 1) / alignment * alignment;
    check_tensor_data();
  }

 private:
  enum class Ctx { none, header, key, value, tensor };

  // Where the cursor is, for messages: "key 'x'", "tensor #3 'blk.0.attn_q.weight'".
  std::string where() const {
    switch (context_) {
      case Ctx::none: return "";
      case Ctx::header: return " in the header";
      case Ctx::key: return " in the name of key #" + std::to_string(index_);
      case Ctx::value: return " in the value of key " + quote_name(key_);
      case Ctx::tensor:
        return " in the info of tensor #" + std::to_string(index_) +
               (key_.empty() ? std::string() : " " + quote_name(key_));
    }
    return "";
  }
  std::string key_context() const { return label_ + ": key " + quote_name(key_); }
  std::string tensor_context(std::string_view name) const {
    return label_ + ": tensor " + quote_name(name);
  }

  uint64_t remaining() const { return size_ - pos_; }

  const std::byte* take(uint64_t n, const char* what) {
    if (n > remaining())
      fail(ErrorCode::format,
           label_ + ": truncated at byte " + std::to_string(size_) + where() + ": " + what +
               " needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left");
    if (n > b_.size() - pos_) throw NeedMore{pos_ + n};
    const std::byte* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint32_t u32(const char* what) { return static_cast<uint32_t>(load_bits(take(4, what), 4)); }
  uint64_t u64(const char* what) { return load_bits(take(8, what), 8); }

  std::string_view string(const char* what) {
    const uint64_t at = pos_;
    const uint64_t n = u64(what);
    if (n > remaining())
      fail(ErrorCode::format, label_ + ": " + std::string(what) + where() + " at byte " +
                                  std::to_string(at) + " has length " + std::to_string(n) +
                                  ", beyond the " + std::to_string(remaining()) +
                                  " bytes left in the file");
    return {reinterpret_cast<const char*>(take(n, what)), n};
  }

  void parse_header() {
    context_ = Ctx::header;
    if (b_.size() < std::min<uint64_t>(size_, 4)) throw NeedMore{4};
    if (b_.size() < 4 || std::memcmp(b_.data(), "GGUF", 4) != 0) {
      std::string_view start(reinterpret_cast<const char*>(b_.data()), std::min<size_t>(b_.size(), 4));
      fail(ErrorCode::format, label_ + ": not a GGUF file (it starts with " + quote_name(start) +
                                  ", not 'GGUF')");
    }
    pos_ = 4;
    version = u32("the version");
    if (version == 1)
      fail(ErrorCode::format, label_ + ": GGUF version 1 is not supported (it predates 64-bit "
                                       "counts; convert the file with a current llama.cpp)");
    if ((version & 0xffff) == 0 && version != 0)
      fail(ErrorCode::format, label_ + ": the version field reads " + std::to_string(version) +
                                  ": a big-endian GGUF file, which vkformer does not read");
    if (version != 2 && version != 3)
      fail(ErrorCode::format, label_ + ": GGUF version " + std::to_string(version) +
                                  " is not supported (vkformer reads versions 2 and 3)");
    n_tensors_ = u64("the tensor count");
    n_kv_ = u64("the metadata key count");
    if (n_kv_ > remaining() / kMinKvBytes)
      fail(ErrorCode::format, label_ + ": the metadata key count " + std::to_string(n_kv_) +
                                  " cannot fit in the " + std::to_string(remaining()) +
                                  " bytes after the header (each takes at least " +
                                  std::to_string(kMinKvBytes) + ")");
    if (n_tensors_ > remaining() / kMinTensorInfoBytes)
      fail(ErrorCode::format, label_ + ": the tensor count " + std::to_string(n_tensors_) +
                                  " cannot fit in the " + std::to_string(remaining()) +
                                  " bytes after the header (each tensor info takes at least " +
                                  std::to_string(kMinTensorInfoBytes) + ")");
  }

  void parse_kv(uint64_t i) {
    context_ = Ctx::key;
    index_ = i;
    key_ = {};
    key_ = string("the key");
    if (key_.size() > kMaxKeyBytes)
      fail(ErrorCode::format, label_ + ": key #" + std::to_string(i) + " " + quote_name(key_) +
                                  " is " + std::to_string(key_.size()) + " bytes long (at most " +
                                  std::to_string(kMaxKeyBytes) + ")");
    if (!key_index.emplace(key_, metadata.size()).second)
      fail(ErrorCode::format, key_context() + " appears twice (as key #" +
                                  std::to_string(key_index[key_]) + " and #" + std::to_string(i) + ")");
    context_ = Ctx::value;
    GgufKeyValue kv{key_, {}};
    const uint32_t type = u32("the value type");
    parse_value(&kv.value, type, 0);
    metadata.push_back(std::move(kv));
  }

  GgufValueType value_type(uint32_t type, bool element) {
    if (type > static_cast<uint32_t>(GgufValueType::f64))
      fail(ErrorCode::format, key_context() + " has " + (element ? "array element " : "value ") +
                                  "type " + std::to_string(type) +
                                  ", which GGUF does not define (0..12)");
    return static_cast<GgufValueType>(type);
  }

  void check_bools(std::span<const std::byte> bytes) {
    for (size_t i = 0; i < bytes.size(); ++i)
      if (static_cast<uint8_t>(bytes[i]) > 1)
        fail(ErrorCode::format, key_context() + ": bool " +
                                    (bytes.size() > 1 ? "element " + std::to_string(i) + " " : "") +
                                    "is " + std::to_string(static_cast<uint8_t>(bytes[i])) +
                                    ", neither 0 nor 1");
  }

  void parse_value(GgufValue* v, uint32_t raw_type, int depth) {
    v->type_ = value_type(raw_type, depth > 0);
    if (v->type_ == GgufValueType::string) {
      v->str_ = string("a string");
      return;
    }
    if (v->type_ != GgufValueType::array) {
      const size_t n = value_size(v->type_);
      const std::byte* p = take(n, "the value");
      if (v->type_ == GgufValueType::boolean) check_bools({p, 1});
      v->bits_ = load_bits(p, n);
      return;
    }
    if (depth >= kMaxArrayDepth)
      fail(ErrorCode::format, key_context() + ": arrays nested more than " +
                                  std::to_string(kMaxArrayDepth) + " deep");
    const uint32_t elem_raw = u32("the array element type");
    v->elem_type_ = value_type(elem_raw, true);
    const uint64_t at = pos_;
    v->count_ = u64("the array length");
    const uint64_t left = remaining();
    auto too_long = [&](uint64_t min_each) {
      fail(ErrorCode::format, key_context() + ": the array length " + std::to_string(v->count_) +
                                  " at byte " + std::to_string(at) + " cannot fit in the " +
                                  std::to_string(left) + " bytes left (each " +
                                  std::string(gguf_type_name(v->elem_type_)) + " takes " +
                                  (min_each > value_size(v->elem_type_) ? "at least " : "") +
                                  std::to_string(min_each) + ")");
    };
    switch (v->elem_type_) {
      case GgufValueType::string:
        if (v->count_ > left / 8) too_long(8);
        v->strings_.reserve(v->count_);
        for (uint64_t i = 0; i < v->count_; ++i) v->strings_.push_back(string("a string"));
        return;
      case GgufValueType::array:
        if (v->count_ > left / 12) too_long(12);
        v->arrays_.resize(v->count_);
        for (GgufValue& item : v->arrays_) {
          item.type_ = GgufValueType::array;
          parse_value(&item, static_cast<uint32_t>(GgufValueType::array), depth + 1);
        }
        return;
      default: {
        const size_t n = value_size(v->elem_type_);
        if (v->count_ > left / n) too_long(n);
        v->raw_ = {take(v->count_ * n, "the array"), v->count_ * n};
        if (v->elem_type_ == GgufValueType::boolean) check_bools(v->raw_);
        return;
      }
    }
  }

  void parse_tensor_info(uint64_t i, std::unordered_map<std::string_view, size_t>* names) {
    context_ = Ctx::tensor;
    index_ = i;
    key_ = {};
    const std::string_view name = string("the tensor name");
    key_ = name;
    const std::string ctx = tensor_context(name);
    if (name.size() > kMaxTensorNameBytes)
      fail(ErrorCode::format, ctx + ": the name is " + std::to_string(name.size()) +
                                  " bytes long (GGUF allows at most " +
                                  std::to_string(kMaxTensorNameBytes) + ")");
    if (!names->emplace(name, i).second)
      fail(ErrorCode::format, ctx + " appears twice (as tensors #" +
                                  std::to_string((*names)[name]) + " and #" + std::to_string(i) + ")");
    GgufTensorInfo t;
    t.name = std::string(name);
    t.n_dims = u32("the dimension count");
    if (t.n_dims > 4)
      fail(ErrorCode::format, ctx + " has " + std::to_string(t.n_dims) +
                                  " dimensions (at most 4)");
    t.numel = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      t.ne[d] = u64("a dimension");
      if (t.ne[d] == 0)
        fail(ErrorCode::format, ctx + ": dimension " + std::to_string(d) + " is 0");
      if (!io::checked_mul(t.numel, t.ne[d], &t.numel) ||
          t.numel > static_cast<uint64_t>(INT64_MAX))
        fail(ErrorCode::format, ctx + ": the element count of dims " + dims_string(t, d + 1) +
                                    " overflows int64");
    }
    const uint32_t type = u32("the ggml type");
    const GgmlTypeInfo* info = find_ggml_type(type);
    if (!info)
      fail(ErrorCode::format, ctx + " has " + describe_ggml_type_number(type) +
                                  ", which vkformer does not know");
    t.type = info->type;
    if (t.ne[0] % info->block_size != 0)
      fail(ErrorCode::format, ctx + " is " + std::string(info->name) + " with rows of " +
                                  std::to_string(t.ne[0]) + " elements, not a multiple of its block size " +
                                  std::to_string(info->block_size));
    // numel / block_size * block_bytes <= numel * 8: no overflow below 2^63.
    t.nbytes = t.numel / info->block_size * info->block_bytes;
    t.offset = u64("the data offset");
    tensors.push_back(std::move(t));
  }

  static std::string dims_string(const GgufTensorInfo& t, uint32_t n) {
    std::string s = "[";
    for (uint32_t d = 0; d < n; ++d) {
      if (d) s += ',';
      s += std::to_string(t.ne[d]);
    }
    return s + "]";
  }

  void check_tensor_data() {
    const uint64_t size = size_;
    for (const GgufTensorInfo& t : tensors) {
      const std::string ctx = tensor_context(t.name);
      if (t.offset % alignment != 0)
        fail(ErrorCode::format, ctx + ": data offset " + std::to_string(t.offset) +
                                    " is not a multiple of the alignment " + std::to_string(alignment));
      uint64_t begin = 0, end = 0;
      if (__builtin_add_overflow(data_offset, t.offset, &begin) ||
          __builtin_add_overflow(begin, t.nbytes, &end) || end > size)
        fail(ErrorCode::format,
             ctx + ": its " + std::to_string(t.nbytes) + " bytes at data offset " +
                 std::to_string(t.offset) + " (the data section starts at byte " +
                 std::to_string(data_offset) + ") end beyond the file's " + std::to_string(size) +
                 " bytes");
    }
    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& a = tensors[order[k - 1]];
      const GgufTensorInfo& b = tensors[order[k]];
      if (a.offset + a.nbytes > b.offset)
        fail(ErrorCode::format, label_ + ": tensors " + quote_name(a.name) + " (bytes " +
                                    std::to_string(a.offset) + ".." + std::to_string(a.offset + a.nbytes) +
                                    " of the data section) and " + quote_name(b.name) + " (from " +
                                    std::to_string(b.offset) + ") overlap");
    }
  }

  std::span<const std::byte> b_;
  uint64_t size_;
  const std::string& label_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0, n_kv_ = 0;
  Ctx context_ = Ctx::none;
  uint64_t index_ = 0;
  std::string_view key_;
};

// ------------------------------------------------------------------------------- GgufFile

struct GgufFile::Impl {
  std::string label;
  io::FileBytes file;
  // A mapped file's header (metadata and tensor infos), read into memory: the parsed values view
  // these bytes, and tensors are read with read_at, so nothing reads through the mapping.
  std::vector<std::byte> header;
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<GgufKeyValue> metadata;
  std::unordered_map<std::string_view, size_t> key_index;  // views into the file's bytes
  std::vector<GgufTensorInfo> tensors;
  std::unordered_map<std::string_view, size_t> tensor_index;  // views into tensors' names

  void parse() {
    if (!file.mapped()) return parse_from(file.bytes());
    // The header's size is known only once it is parsed: read 1 MiB, then twice as much as the
    // parser asked for, until it is complete (SmolLM2's, with its vocabulary, is 1.8 MB).
    uint64_t want = std::min<uint64_t>(file.size(), 1u << 20);
    for (;;) {
      header = file.read_at(0, want, label);
      try {
        return parse_from(header);
      } catch (const GgufParser::NeedMore& more) {
        want = std::min(file.size(), std::max(more.bytes, 2 * want));
      }
    }
  }

  void parse_from(std::span<const std::byte> bytes) {
    GgufParser p(bytes, file.size(), label);
    p.parse();
    version = p.version;
    alignment = p.alignment;
    data_offset = p.data_offset;
    metadata = std::move(p.metadata);
    key_index = std::move(p.key_index);
    tensors = std::move(p.tensors);
    tensor_index.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) tensor_index.emplace(tensors[i].name, i);
  }

  std::string key_context(std::string_view key) const { return label + ": key " + quote_name(key); }
};

GgufFile::GgufFile(const std::filesystem::path& path, Access access)
    : impl_(std::make_unique<Impl>()) {
  impl_->label = path.string();
  impl_->file = io::FileBytes::open(path, access == Access::map);
  impl_->parse();
  io::run_opened_hook(path);
}

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GgufFile GgufFile::from_bytes(std::vector<std::byte> bytes, std::string label) {
  auto impl = std::make_unique<Impl>();
  impl->label = std::move(label);
  impl->file = io::FileBytes::from_vector(std::move(bytes));
  impl->parse();
  return GgufFile(std::move(impl));
}

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

const GgufFile::Impl& GgufFile::impl() const {
  if (!impl_)
    fail(ErrorCode::invalid_argument, "GgufFile: this file was moved from; use the GgufFile it was moved to");
  return *impl_;
}

const std::string& GgufFile::label() const { return impl().label; }
bool GgufFile::memory_mapped() const { return impl().file.mapped(); }
uint32_t GgufFile::version() const { return impl().version; }
uint64_t GgufFile::alignment() const { return impl().alignment; }
uint64_t GgufFile::data_offset() const { return impl().data_offset; }
const std::vector<GgufKeyValue>& GgufFile::metadata() const { return impl().metadata; }

const GgufValue* GgufFile::find(std::string_view key) const {
  const Impl& f = impl();
  auto it = f.key_index.find(key);
  return it == f.key_index.end() ? nullptr : &f.metadata[it->second].value;
}

const GgufValue& GgufFile::value(std::string_view key) const {
  if (const GgufValue* v = find(key)) return *v;
  fail(ErrorCode::format, impl().key_context(key) + " is missing (the file has " +
                              std::to_string(impl().metadata.size()) + " keys)");
}

std::string_view GgufFile::get_string(std::string_view key) const {
  return value(key).as_string(impl().key_context(key));
}
int64_t GgufFile::get_int(std::string_view key) const {
  return value(key).as_int(impl().key_context(key));
}
uint64_t GgufFile::get_uint(std::string_view key) const {
  return value(key).as_uint(impl().key_context(key));
}
double GgufFile::get_float(std::string_view key) const {
  return value(key).as_float(impl().key_context(key));
}
bool GgufFile::get_bool(std::string_view key) const {
  return value(key).as_bool(impl().key_context(key));
}
const std::vector<std::string_view>& GgufFile::get_strings(std::string_view key) const {
  return value(key).as_strings(impl().key_context(key));
}
std::vector<int64_t> GgufFile::get_ints(std::string_view key) const {
  return value(key).as_ints(impl().key_context(key));
}
std::vector<double> GgufFile::get_floats(std::string_view key) const {
  return value(key).as_floats(impl().key_context(key));
}
std::string_view GgufFile::get_string_or(std::string_view key, std::string_view fallback) const {
  return has(key) ? get_string(key) : fallback;
}
uint64_t GgufFile::get_uint_or(std::string_view key, uint64_t fallback) const {
  return has(key) ? get_uint(key) : fallback;
}
double GgufFile::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}

const std::vector<GgufTensorInfo>& GgufFile::tensors() const { return impl().tensors; }

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const Impl& f = impl();
  auto it = f.tensor_index.find(name);
  return it == f.tensor_index.end() ? nullptr : &f.tensors[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  if (const GgufTensorInfo* t = find_tensor(name)) return *t;
  fail(ErrorCode::format, impl().label + ": no tensor named " + quote_name(name) + " (the file has " +
                              std::to_string(impl().tensors.size()) + " tensors)");
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensorInfo& t) const {
  const Impl& f = impl();
  const GgufTensorInfo* mine = find_tensor(t.name);
  if (mine == nullptr || mine->offset != t.offset || mine->nbytes != t.nbytes)
    fail(ErrorCode::invalid_argument,
         f.label + ": the tensor " + quote_name(t.name) + " does not belong to this file");
  return f.file.bytes().subspan(f.data_offset + t.offset, t.nbytes);
}

std::vector<float> GgufFile::dequantize_rows(const GgufTensorInfo& t, uint64_t first,
                                             uint64_t count) const {
  tensor_bytes(t);  // checks that t is this file's
  const std::string ctx = impl().label + ": tensor " + quote_name(t.name);
  if (first > t.rows() || count > t.rows() - first)
    fail(ErrorCode::invalid_argument, ctx + ": rows [" + std::to_string(first) + ", " +
                                          std::to_string(first) + "+" + std::to_string(count) +
                                          ") are beyond its " + std::to_string(t.rows()) + " rows");
  const GgmlTypeInfo& info = ggml_type_info(t.type);
  if (!info.dequantizable)
    fail(ErrorCode::format, ctx + " is " + std::string(info.name) +
                                ", which vkformer cannot convert to f32");
  const uint64_t row_bytes = ggml_row_bytes(t.type, t.row_length());
  // Copied out of the file (io_util.hpp, FileBytes::read_at), never read through a mapping.
  const std::vector<std::byte> bytes =
      impl().file.read_at(impl().data_offset + t.offset + first * row_bytes, count * row_bytes, impl().label);
  std::vector<float> out(count * t.row_length());
  for (uint64_t r = 0; r < count; ++r)
    dequantize_row(t.type, std::span<const std::byte>(bytes).subspan(r * row_bytes, row_bytes),
                   std::span<float>(out).subspan(r * t.row_length(), t.row_length()));
  return out;
}

HostTensor GgufFile::read_f32(std::string_view name) const {
  const GgufTensorInfo& t = tensor(name);
  std::vector<float> values = dequantize_rows(t, 0, t.rows());
  return HostTensor::from_f32(t.shape(), values);
}

HostTensor GgufFile::read_raw(std::string_view name) const {
  const GgufTensorInfo& t = tensor(name);
  DType dtype;
  try {
    dtype = dtype_from_ggml(t.type);
  } catch (const Error& e) {
    fail(ErrorCode::format, impl().label + ": tensor " + quote_name(t.name) + ": " + e.what());
  }
  tensor_bytes(t);  // checks that t is this file's
  HostTensor out(t.shape(), dtype);
  if (out.nbytes() != t.nbytes)
    fail(ErrorCode::internal, impl().label + ": tensor " + quote_name(t.name) + " has " +
                                  std::to_string(t.nbytes) + " bytes but its dtype needs " +
                                  std::to_string(out.nbytes()));
  impl().file.read_at(impl().data_offset + t.offset, std::span<std::byte>(out.data(), out.nbytes()),
                      impl().label);
  return out;
}

}  // namespace vkformer
