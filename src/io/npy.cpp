// NumPy .npy: reading format versions 1.0 to 3.0 and writing 1.0 byte for byte as np.save does.
//
// The header is a Python literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ending in '\n'; it is parsed here as just that subset, never evaluated.
#include <cstring>
#include <limits>
#include <optional>

#include "io_util.hpp"
#include "vkformer/half.hpp"
#include "vkformer/io.hpp"

namespace vkformer {

using io::ElemType;
using io::fail;
using io::quote_name;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> dims;
};

std::string tuple_string(const std::vector<uint64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

class HeaderParser : io::TextCursor {
 public:
  HeaderParser(std::string_view text, std::string_view label, size_t file_offset)
      : TextCursor(text), label_(label), file_offset_(file_offset) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    ws();
    expect('{', "to start the header dictionary");
    for (;;) {
      ws();
      if (peek() == '}') break;
      const size_t key_pos = pos_;
      std::string key = string("a key");
      ws();
      expect(':', "after the key " + quote_name(key));
      ws();
      auto once = [&](bool& have) {
        if (have) error(key_pos, "duplicate key " + quote_name(key));
        have = true;
      };
      if (key == "descr") {
        once(have_descr);
        if (peek() == '[') error(pos_, "structured dtypes (a list 'descr') are not supported");
        h.descr = string("the 'descr' string");
      } else if (key == "fortran_order") {
        once(have_fortran);
        h.fortran_order = boolean();
      } else if (key == "shape") {
        once(have_shape);
        h.dims = shape();
      } else {
        error(key_pos, "unexpected key " + quote_name(key) +
                           " (a .npy header has 'descr', 'fortran_order' and 'shape')");
      }
      ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') error(pos_, "expected ',' or '}', found " + found());
    }
    ++pos_;  // '}'
    ws();
    if (pos_ != text_.size()) error(pos_, "unexpected " + found() + " after the dictionary");
    if (!have_descr) error(0, "the header has no 'descr'");
    if (!have_fortran) error(0, "the header has no 'fortran_order'");
    if (!have_shape) error(0, "the header has no 'shape'");
    return h;
  }

 private:
  [[noreturn]] void error(size_t at, const std::string& what) const {
    fail(ErrorCode::format, std::string(label_) + ": invalid .npy header at file byte " +
                                std::to_string(file_offset_ + at) + ": " + what);
  }
  void expect(char c, const std::string& where) {
    if (peek() != static_cast<unsigned char>(c))
      error(pos_, std::string("expected '") + c + "' " + where + ", found " + found());
    ++pos_;
  }

  // A Python string literal in single or double quotes (a backslash takes the next byte).
  std::string string(const char* what) {
    int q = peek();
    if (q != '\'' && q != '"') error(pos_, std::string("expected ") + what + ", found " + found());
    const size_t start = pos_++;
    std::string out;
    for (;;) {
      int c = peek();
      if (c < 0 || c == '\n') error(start, "unterminated string");
      ++pos_;
      if (c == q) return out;
      if (c == '\\') {
        c = peek();
        if (c < 0) error(start, "unterminated string");
        ++pos_;
      }
      out += static_cast<char>(c);
    }
  }

  bool boolean() {
    for (auto [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    error(pos_, "'fortran_order' must be True or False, found " + found());
  }

  std::vector<uint64_t> shape() {
    if (peek() != '(') error(pos_, "'shape' must be a tuple of integers, found " + found());
    ++pos_;
    std::vector<uint64_t> dims;
    for (;;) {
      ws();
      if (peek() == ')') break;
      if (dims.size() == static_cast<size_t>(Shape::kMaxRank))
        error(pos_, "'shape' has more than " + std::to_string(Shape::kMaxRank) +
                        " dimensions (vkformer tensors have rank 0 to 4)");
      const size_t start = pos_;
      if (peek() == '-') error(start, "'shape' has a negative dimension");
      if (peek() < '0' || peek() > '9') error(pos_, "expected a dimension, found " + found());
      uint64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        auto digit = static_cast<uint64_t>(peek() - '0');
        if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10)
          error(start, "dimension " + std::to_string(dims.size()) + " of 'shape' is too large");
        v = v * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2's long literals
      dims.push_back(v);
      ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') error(pos_, "expected ',' or ')' in 'shape', found " + found());
    }
    ++pos_;  // ')'
    return dims;
  }

  std::string_view label_;
  size_t file_offset_;
};

// The element type of a 'descr' such as '<f4'.
ElemType parse_descr(const std::string& descr, std::string_view label) {
  auto unsupported = [&](const std::string& why) -> ElemType {
    fail(ErrorCode::format, std::string(label) + ": dtype " + quote_name(descr) + " " + why);
  };
  if (descr.size() < 2) unsupported("is not a NumPy type string");
  const char order = descr[0];
  const std::string_view type = std::string_view(descr).substr(1);
  struct Known {
    std::string_view code;
    ElemType elem;
  };
  static constexpr Known kKnown[] = {
      {"f2", ElemType::f16}, {"f4", ElemType::f32}, {"f8", ElemType::f64},
      {"i1", ElemType::i8},  {"i2", ElemType::i16}, {"i4", ElemType::i32},
      {"i8", ElemType::i64}, {"u1", ElemType::u8},  {"u2", ElemType::u16},
      {"u4", ElemType::u32}, {"u8", ElemType::u64}, {"b1", ElemType::boolean},
  };
  const Known* known = nullptr;
  for (const auto& k : kKnown)
    if (k.code == type) known = &k;
  if (order != '<' && order != '|' && order != '>' && order != '=')
    unsupported("has no byte order ('<', '|' or '>')");
  if (!known)
    unsupported(
        "is not supported (vkformer reads float16/32/64, signed and unsigned integers "
        "and bool)");
  if (order == '>' && io::elem_size(known->elem) > 1)
    unsupported(
        "is big-endian, which is not supported; save the array little-endian, e.g. "
        "np.save(path, a.astype(a.dtype.newbyteorder('<')))");
  return known->elem;
}

// The header's shape as a vkformer Shape; one vkformer cannot hold is a fault of the file.
Shape to_shape(const std::vector<uint64_t>& dims, const std::string& label) {
  try {
    return Shape(std::vector<int64_t>(dims.begin(), dims.end()));
  } catch (const Error& e) {
    fail(ErrorCode::format, label + ": 'shape' " + tuple_string(dims) + ": " + e.what());
  }
}

uint32_t load_le(const std::byte* p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

HostTensor parse_npy(std::span<const std::byte> bytes, std::string_view label_view) {
  const std::string label(label_view);
  const size_t size = bytes.size();
  const char* text = reinterpret_cast<const char*>(bytes.data());
  if (size < kMagicLen || std::memcmp(text, kMagic, kMagicLen) != 0)
    fail(ErrorCode::format, label + ": not a .npy file (it does not start with \\x93NUMPY)");
  if (size < 8)
    fail(ErrorCode::format,
         label + ": truncated in the format version (" + std::to_string(size) + " bytes)");
  const auto major = static_cast<unsigned>(bytes[6]), minor = static_cast<unsigned>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    fail(ErrorCode::format, label + ": .npy format version " + std::to_string(major) + "." +
                                std::to_string(minor) +
                                " is not supported (vkformer reads 1.0, 2.0 and 3.0)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t header_start = 8 + len_bytes;
  if (size < header_start)
    fail(ErrorCode::format,
         label + ": truncated in the header length (" + std::to_string(size) + " bytes)");
  const size_t header_len = load_le(bytes.data() + 8, len_bytes);
  if (header_len > size - header_start)
    fail(ErrorCode::format, label + ": header length " + std::to_string(header_len) +
                                " is larger than the rest of the file (" +
                                std::to_string(size - header_start) + " bytes)");
  NpyHeader h =
      HeaderParser(std::string_view(text + header_start, header_len), label, header_start).parse();

  const ElemType elem = parse_descr(h.descr, label);
  if (h.fortran_order && h.dims.size() > 1)
    fail(ErrorCode::format, label +
                                ": fortran_order True (column-major data) is not supported; "
                                "save np.ascontiguousarray(a)");
  uint64_t numel = 1, nbytes = 0;
  for (uint64_t d : h.dims)
    if (!io::checked_mul(numel, d, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(ErrorCode::format,
           label + ": shape " + tuple_string(h.dims) + " has more elements than fit in 63 bits");
  if (!io::checked_mul(numel, io::elem_size(elem), &nbytes))
    fail(ErrorCode::format, label + ": shape " + tuple_string(h.dims) + " of " + h.descr +
                                " is larger than 2^64 bytes");
  const size_t data_start = header_start + header_len;
  const uint64_t have = size - data_start;
  const std::string what = "shape " + tuple_string(h.dims) + " of " + h.descr + " needs " +
                           std::to_string(nbytes) + " bytes of data";
  if (have < nbytes)
    fail(ErrorCode::format,
         label + ": truncated: " + what + ", the file has " + std::to_string(have));
  if (have > nbytes)
    fail(ErrorCode::format, label + ": " + std::to_string(have - nbytes) + " trailing bytes: " +
                                what + ", the file has " + std::to_string(have));

  return io::decode_elements(bytes.subspan(data_start), elem, to_shape(h.dims, label),
                             io::natural_dtype(elem), label);
}

HostTensor read_npy(const std::filesystem::path& path) {
  // Read, not mapped: parsing reads the bytes in place, and a mapped file truncated meanwhile
  // would fault (SIGBUS) instead of failing with a message.
  io::FileBytes file = io::FileBytes::open(path, /*try_map=*/false);
  return parse_npy(file.bytes(), path.string());
}

void write_npy(const std::filesystem::path& path, const HostTensor& t, NpyType type) {
  const std::string what = "write_npy";
  io::check_tensor_bytes(t, what);
  if (type == NpyType::automatic)
    type = t.dtype() == DType::f32   ? NpyType::float32
           : t.dtype() == DType::f16 ? NpyType::float16
                                     : NpyType::int64;
  const bool float_type = type == NpyType::float32 || type == NpyType::float16;
  if (float_type != is_float(t.dtype()))
    fail(ErrorCode::invalid_argument,
         what + ": a " + std::string(dtype_name(t.dtype())) + " tensor cannot be written as " +
             (float_type ? "a float type (write it as int64, int32 or boolean)"
                         : "an integer type (write it as float32 or float16)"));

  const auto n = static_cast<size_t>(t.numel());
  std::vector<std::byte> data;
  const char* descr = nullptr;
  auto put = [&](const void* p, size_t k) {
    const auto* b = static_cast<const std::byte*>(p);
    data.insert(data.end(), b, b + k);
  };
  switch (type) {
    case NpyType::float32:
      descr = "<f4";
      if (t.dtype() == DType::f32) {
        put(t.data(), t.nbytes());
      } else {
        data.reserve(n * 4);
        for (size_t i = 0; i < n; ++i) {
          float v = t.f32_at(static_cast<int64_t>(i));
          put(&v, 4);
        }
      }
      break;
    case NpyType::float16:
      descr = "<f2";
      if (t.dtype() == DType::f16) {
        put(t.data(), t.nbytes());
      } else {
        data.reserve(n * 2);
        for (size_t i = 0; i < n; ++i) {
          uint16_t v = float_to_half(t.f32_at(static_cast<int64_t>(i)));
          put(&v, 2);
        }
      }
      break;
    case NpyType::int32:
      descr = "<i4";
      put(t.data(), t.nbytes());
      break;
    case NpyType::int64: {
      descr = "<i8";
      data.reserve(n * 8);
      for (int32_t v32 : t.to_i32()) {
        int64_t v = v32;
        put(&v, 8);
      }
      break;
    }
    case NpyType::boolean:
      descr = "|b1";
      for (int32_t v : t.to_i32()) data.push_back(static_cast<std::byte>(v != 0 ? 1 : 0));
      break;
    case NpyType::automatic: break;
  }

  // np.save's layout: the dict with sorted keys, spare spaces so the first dimension can grow in
  // place (to 21 digits), padding so the data starts at a multiple of 64, and '\n'.
  const auto dims = t.shape().dims();
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " +
                       tuple_string(std::vector<uint64_t>(dims.begin(), dims.end())) + ", }";
  if (!dims.empty()) header.append(21 - std::to_string(dims[0]).size(), ' ');
  const size_t hlen = header.size() + 1;
  header.append(64 - (kMagicLen + 4 + hlen) % 64, ' ');
  header += '\n';

  unsigned char prefix[10] = {0x93,
                              'N',
                              'U',
                              'M',
                              'P',
                              'Y',
                              1,
                              0,
                              static_cast<unsigned char>(header.size() & 0xff),
                              static_cast<unsigned char>(header.size() >> 8)};
  io::OutputFile out(path, what);
  out.write(prefix, sizeof prefix);
  out.write(header.data(), header.size());
  out.write(data.data(), data.size());
  out.close();
}

}  // namespace vkformer
