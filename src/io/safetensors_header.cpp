// Parsing and validating the safetensors JSON header (see safetensors_header.hpp).
#include "safetensors_header.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace vkformer::io {

namespace {

constexpr int kMaxSkipDepth = 64;

// Every dtype of the safetensors specification (including the sub-byte and fp8 ones, so their
// files open and list; only reading those tensors fails).
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 8, ElemType::boolean},
    {"U8", 8, ElemType::u8},
    {"I8", 8, ElemType::i8},
    {"I16", 16, ElemType::i16},
    {"U16", 16, ElemType::u16},
    {"F16", 16, ElemType::f16},
    {"BF16", 16, ElemType::bf16},
    {"I32", 32, ElemType::i32},
    {"U32", 32, ElemType::u32},
    {"F32", 32, ElemType::f32},
    {"F64", 64, ElemType::f64},
    {"I64", 64, ElemType::i64},
    {"U64", 64, ElemType::u64},
    {"F8_E5M2", 8, {}},
    {"F8_E4M3", 8, {}},
    {"F8_E8M0", 8, {}},
    {"F4", 4, {}},
    {"F6_E2M3", 6, {}},
    {"F6_E3M2", 6, {}},
    {"C64", 64, {}},
};

std::string u64s(uint64_t v) { return std::to_string(v); }

std::string shape_string(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += u64s(dims[i]);
  }
  return s + "]";
}

// A JSON reader over the header text that knows the safetensors schema.
class HeaderParser : TextCursor {
 public:
  HeaderParser(std::string_view text, const std::string& label, uint64_t data_size)
      : TextCursor(text), label_(label), data_size_(data_size) {}

  void parse(std::vector<SafetensorsEntry>* entries, std::map<std::string, std::string>* meta) {
    entries_ = entries;
    meta_ = meta;
    ws();
    if (peek() != '{') syntax(pos_, "expected the header to be a JSON object, found " + found());
    ++pos_;
    ws();
    if (peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        size_t key_pos = pos_;
        if (peek() != '"') syntax(pos_, "expected a tensor name (a string), found " + found());
        std::string key = string();
        ws();
        expect(':', "after the key " + quote_name(key));
        ws();
        if (key == "__metadata__") {
          if (seen_metadata_) syntax(key_pos, "duplicate key '__metadata__'");
          seen_metadata_ = true;
          metadata();
        } else {
          if (index_.count(key)) syntax(key_pos, "duplicate tensor name " + quote_name(key));
          index_.emplace(key, entries_->size());
          tensor(std::move(key));
        }
        if (another('}', "after a value")) continue;
        break;
      }
    }
    ws();
    if (pos_ != text_.size())
      syntax(pos_, "unexpected " + found() + " after the header's JSON object");
    check_coverage();
  }

 private:
  // ---- errors
  [[noreturn]] void syntax(size_t at, const std::string& what) const {
    fail(ErrorCode::format,
         label_ + ": invalid safetensors header at byte " + u64s(at) + " of the header: " + what);
  }
  // After a member or element: skips white space, then consumes ',' (true: another one follows)
  // or `close` (false: the object or array ends); anything else is a syntax error naming `where`.
  bool another(char close, const std::string& where) {
    ws();
    if (peek() == ',') {
      ++pos_;
      ws();
      return true;
    }
    if (peek() == close) {
      ++pos_;
      return false;
    }
    syntax(pos_, std::string("expected ',' or '") + close + "'" + (where.empty() ? "" : " " + where) +
                     ", found " + found());
  }

  [[noreturn]] void bad_tensor(const std::string& name, size_t at, const std::string& what) const {
    fail(ErrorCode::format,
         label_ + ": tensor " + quote_name(name) + " (header byte " + u64s(at) + "): " + what);
  }
  // ---- lexing
  void expect(char c, const std::string& where) {
    if (peek() != static_cast<unsigned char>(c))
      syntax(pos_, std::string("expected '") + c + "' " + where + ", found " + found());
    ++pos_;
  }

  static int hex_value(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  uint32_t hex4() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      int h = hex_value(peek());
      if (h < 0) syntax(pos_, "expected 4 hex digits after \\u, found " + found());
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    return v;
  }
  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // A JSON string at pos_ (which is '"'), unescaped, checked to be UTF-8.
  std::string string() {
    const size_t start = pos_;
    ++pos_;
    std::string out;
    for (;;) {
      if (pos_ >= text_.size()) syntax(start, "unterminated string");
      auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c == '\\') {
        const size_t esc = pos_++;
        int e = peek();
        ++pos_;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xdc00 && cp <= 0xdfff) syntax(esc, "lone low surrogate in a \\u escape");
            if (cp >= 0xd800 && cp <= 0xdbff) {
              if (peek() != '\\' || pos_ + 1 >= text_.size() || text_[pos_ + 1] != 'u')
                syntax(esc, "high surrogate in a \\u escape without its low surrogate");
              pos_ += 2;
              uint32_t lo = hex4();
              if (lo < 0xdc00 || lo > 0xdfff)
                syntax(esc, "high surrogate in a \\u escape without its low surrogate");
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            append_utf8(out, cp);
            break;
          }
          default:
            if (e < 0) syntax(start, "unterminated string");
            syntax(esc, "invalid escape in a string");
        }
        continue;
      }
      if (c < 0x20) syntax(pos_, "control character in a string (it must be escaped)");
      size_t len = io::utf8_sequence_length(text_, pos_);
      if (len == 0) syntax(pos_, "invalid UTF-8 in a string");
      out.append(text_.substr(pos_, len));
      pos_ += len;
    }
  }

  // A non-negative JSON integer; `what` says which, for messages.
  uint64_t uint(const std::string& what) {
    const size_t start = pos_;
    if (peek() == '-') syntax(start, what + " is negative");
    if (peek() < '0' || peek() > '9')
      syntax(start, "expected " + what + " (a non-negative integer), found " + found());
    uint64_t v = 0;
    const bool leading_zero = peek() == '0';
    while (peek() >= '0' && peek() <= '9') {
      auto digit = static_cast<uint64_t>(peek() - '0');
      if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10)
        syntax(start, what + " is too large for 64 bits");
      v = v * 10 + digit;
      ++pos_;
    }
    if (leading_zero && pos_ - start > 1) syntax(start, what + " has a leading zero");
    if (peek() == '.' || peek() == 'e' || peek() == 'E') syntax(start, what + " is not an integer");
    return v;
  }

  // Any JSON value, validated and discarded.
  void skip_value(int depth) {
    if (depth > kMaxSkipDepth)
      syntax(pos_, "values nested deeper than " + std::to_string(kMaxSkipDepth) + " levels");
    int c = peek();
    if (c == '"') {
      string();
    } else if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++pos_;
      ws();
      if (peek() == close) {
        ++pos_;
        return;
      }
      for (;;) {
        if (c == '{') {
          if (peek() != '"') syntax(pos_, "expected a key (a string), found " + found());
          string();
          ws();
          expect(':', "after a key");
          ws();
        }
        skip_value(depth + 1);
        if (another(close, "")) continue;
        return;
      }
    } else if (c == 't' || c == 'f' || c == 'n') {
      for (std::string_view word : {"true", "false", "null"}) {
        if (text_.substr(pos_, word.size()) == word) {
          pos_ += word.size();
          return;
        }
      }
      syntax(pos_, "expected a JSON value, found " + found());
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t start = pos_;
      if (peek() == '-') ++pos_;
      auto digits = [&] {
        size_t d = pos_;
        while (peek() >= '0' && peek() <= '9') ++pos_;
        return pos_ - d;
      };
      if (peek() == '0') {
        ++pos_;
      } else if (digits() == 0) {
        syntax(start, "invalid number");
      }
      if (peek() == '.') {
        ++pos_;
        if (digits() == 0) syntax(start, "invalid number");
      }
      if (peek() == 'e' || peek() == 'E') {
        ++pos_;
        if (peek() == '+' || peek() == '-') ++pos_;
        if (digits() == 0) syntax(start, "invalid number");
      }
    } else {
      syntax(pos_, "expected a JSON value, found " + found());
    }
  }

  // ---- schema
  void metadata() {
    if (text_.substr(pos_, 4) == "null") {  // what an absent Option serializes to
      pos_ += 4;
      return;
    }
    if (peek() != '{')
      syntax(pos_, "'__metadata__' must be an object of strings, found " + found());
    ++pos_;
    ws();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      size_t key_pos = pos_;
      if (peek() != '"') syntax(pos_, "expected a metadata key (a string), found " + found());
      std::string key = string();
      ws();
      expect(':', "after the metadata key " + quote_name(key));
      ws();
      if (peek() != '"')
        syntax(pos_,
               "the metadata value of " + quote_name(key) + " must be a string, found " + found());
      std::string value = string();
      if (!meta_->emplace(std::move(key), std::move(value)).second)
        syntax(key_pos, "duplicate metadata key");
      if (another('}', "in '__metadata__'")) continue;
      return;
    }
  }

  void tensor(std::string name) {
    const size_t obj_pos = pos_;
    if (peek() != '{')
      bad_tensor(
          name, pos_,
          "expected an object with \"dtype\", \"shape\" and \"data_offsets\", found " + found());
    ++pos_;
    ws();
    std::optional<std::string> dtype;
    std::optional<std::vector<uint64_t>> dims;
    std::optional<std::pair<uint64_t, uint64_t>> offsets;
    size_t dtype_pos = 0, shape_pos = 0, offsets_pos = 0;
    std::vector<std::string> other_keys;
    if (peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        const size_t key_pos = pos_;
        if (peek() != '"') syntax(pos_, "expected a field name (a string), found " + found());
        std::string key = string();
        ws();
        expect(':', "after the field " + quote_name(key));
        ws();
        auto duplicate = [&] { bad_tensor(name, key_pos, "duplicate field " + quote_name(key)); };
        if (key == "dtype") {
          if (dtype) duplicate();
          dtype_pos = pos_;
          if (peek() != '"') bad_tensor(name, pos_, "\"dtype\" must be a string, found " + found());
          dtype = string();
        } else if (key == "shape") {
          if (dims) duplicate();
          shape_pos = pos_;
          dims = shape(name);
        } else if (key == "data_offsets") {
          if (offsets) duplicate();
          offsets_pos = pos_;
          offsets = data_offsets(name);
        } else {
          // Unknown fields are skipped, as the reference implementation does.
          if (std::find(other_keys.begin(), other_keys.end(), key) != other_keys.end()) duplicate();
          other_keys.push_back(std::move(key));
          skip_value(1);
        }
        if (another('}', "in the fields of tensor " + quote_name(name))) continue;
        break;
      }
    }
    if (!dtype) bad_tensor(name, obj_pos, "missing \"dtype\"");
    if (!dims) bad_tensor(name, obj_pos, "missing \"shape\"");
    if (!offsets) bad_tensor(name, obj_pos, "missing \"data_offsets\"");

    const DTypeInfo* info = find_dtype(*dtype);
    if (!info) bad_tensor(name, dtype_pos, "unknown dtype " + quote_name(*dtype));

    uint64_t numel = 1;
    for (uint64_t d : *dims) {
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          !io::checked_mul(numel, d, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        bad_tensor(name, shape_pos,
                   "shape " + shape_string(*dims) + " has more elements than fit in 63 bits");
    }
    uint64_t bits = 0;
    if (!io::checked_mul(numel, info->bits, &bits))
      bad_tensor(name, shape_pos,
                 "shape " + shape_string(*dims) + " of " + *dtype + " is larger than 2^64 bits");
    if (bits % 8 != 0)
      bad_tensor(
          name, shape_pos,
          "shape " + shape_string(*dims) + " of " + *dtype + " is not a whole number of bytes");
    const uint64_t nbytes = bits / 8;

    auto [begin, end] = *offsets;
    const std::string range = "data_offsets [" + u64s(begin) + ", " + u64s(end) + "]";
    if (begin > end) bad_tensor(name, offsets_pos, range + ": begin is after end");
    if (end > data_size_)
      bad_tensor(name, offsets_pos,
                 range + " reach beyond the data buffer of " + u64s(data_size_) +
                     " bytes (the file is truncated or the offsets are wrong)");
    if (end - begin != nbytes)
      bad_tensor(name, shape_pos,
                 "shape " + shape_string(*dims) + " of " + *dtype + " needs " + u64s(nbytes) +
                     " bytes but " + range + " span " + u64s(end - begin));

    Shape tensor_shape = to_shape(name, *dims, shape_pos);
    entries_->push_back(
        SafetensorsEntry{std::move(name), std::move(*dtype), tensor_shape, begin, end});
  }

  // A shape vkformer cannot hold (such as an empty one with a huge dim) is a fault of the file.
  Shape to_shape(const std::string& name, const std::vector<uint64_t>& dims, size_t at) const {
    try {
      return Shape(std::vector<int64_t>(dims.begin(), dims.end()));
    } catch (const Error& e) {
      bad_tensor(name, at, e.what());
    }
  }

  std::vector<uint64_t> shape(const std::string& name) {
    if (peek() != '[')
      bad_tensor(name, pos_, "\"shape\" must be an array of integers, found " + found());
    ++pos_;
    ws();
    std::vector<uint64_t> dims;
    if (peek() == ']') {
      ++pos_;
      return dims;
    }
    for (;;) {
      if (dims.size() == static_cast<size_t>(Shape::kMaxRank))
        bad_tensor(name, pos_,
                   "\"shape\" has more than " + std::to_string(Shape::kMaxRank) +
                       " dimensions (vkformer tensors have rank 0 to 4)");
      dims.push_back(uint("dimension " + std::to_string(dims.size()) + " of the shape of " +
                          quote_name(name)));
      if (another(']', "in the shape of " + quote_name(name))) continue;
      return dims;
    }
  }

  std::pair<uint64_t, uint64_t> data_offsets(const std::string& name) {
    const size_t start = pos_;
    auto malformed = [&] {
      bad_tensor(name, start, "\"data_offsets\" must be an array of two integers [begin, end]");
    };
    if (peek() != '[') malformed();
    ++pos_;
    ws();
    if (peek() == ']') malformed();
    uint64_t begin = uint("the begin offset of " + quote_name(name));
    ws();
    if (peek() != ',') malformed();
    ++pos_;
    ws();
    uint64_t end = uint("the end offset of " + quote_name(name));
    ws();
    if (peek() != ']') malformed();
    ++pos_;
    return {begin, end};
  }

  // As the reference implementation requires: the tensors, in the order of their offsets, cover
  // the data buffer exactly, each starting where the one before ends (zero-size ones too), with
  // no gap, no overlap and nothing after the last. Bytes no tensor owns would be silently
  // ignored, and a file that other readers reject must not load here.
  void check_coverage() const {
    const auto& e = *entries_;
    std::vector<size_t> order(e.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return e[a].begin != e[b].begin ? e[a].begin < e[b].begin : e[a].end < e[b].end;
    });
    auto bytes = [](const SafetensorsEntry& t) {
      return " (bytes " + u64s(t.begin) + ".." + u64s(t.end) + ")";
    };
    uint64_t covered = 0;  // the end of the tensors so far
    for (size_t k = 0; k < order.size(); ++k) {
      const auto& cur = e[order[k]];
      if (cur.begin < covered) {
        const auto& prev = e[order[k - 1]];
        fail(ErrorCode::format, label_ + ": tensors " + quote_name(prev.name) + bytes(prev) +
                                    " and " + quote_name(cur.name) + bytes(cur) +
                                    " overlap in the data buffer");
      }
      if (cur.begin > covered)
        fail(ErrorCode::format, label_ + ": bytes " + u64s(covered) + ".." + u64s(cur.begin) +
                                    " of the data buffer belong to no tensor (a gap before " +
                                    quote_name(cur.name) + bytes(cur) +
                                    "); safetensors tensors must follow one another");
      covered = cur.end;
    }
    if (covered != data_size_)
      fail(ErrorCode::format,
           label_ + ": the data buffer has " + u64s(data_size_) + " bytes but its tensors cover " +
               u64s(covered) + ": " + u64s(data_size_ - covered) +
               " trailing bytes after the last tensor (the file is corrupt or was appended to)");
  }

  const std::string& label_;
  uint64_t data_size_;
  std::vector<SafetensorsEntry>* entries_ = nullptr;
  std::map<std::string, std::string>* meta_ = nullptr;
  std::unordered_map<std::string, size_t> index_;
  bool seen_metadata_ = false;
};

}  // namespace

const DTypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

void parse_header(std::string_view text, const std::string& label, uint64_t data_size,
                  std::vector<SafetensorsEntry>* entries, std::map<std::string, std::string>* metadata) {
  HeaderParser(text, label, data_size).parse(entries, metadata);
}

}  // namespace vkformer::io
