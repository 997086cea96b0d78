// libFuzzer harness for the byte-level BPE tokenizer (src/text/bpe_*): the first byte picks what
// the rest is. Even: text to encode with a small fixed vocabulary (special tokens parsed when the
// second byte is odd); valid UTF-8 must decode back to itself, and streaming the tokens' bytes
// through a Utf8StreamDecoder must give valid UTF-8. Odd: a GGUF file whose tokenizer metadata
// is read and then used. A vkformer::Error is the expected answer to bad input; a crash, a
// sanitizer report, a leak or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"
#include "io_util.hpp"  // is_valid_utf8: strict (no overlongs, surrogates, > U+10FFFF)

namespace {

void put(std::vector<uint8_t>& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>& b, std::string_view s) {
  put(b, s.size(), 8);
  b.insert(b.end(), s.begin(), s.end());
}

// GPT-2's character for each byte, "ab", "Ġa", and a control token <c>; merges "a b", "Ġ a".
vkformer::GgufFile small_vocab() {
  std::vector<std::string> tokens;
  int extra = 0;
  for (int byte = 0; byte < 256; ++byte) {
    bool printable = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
    int cp = printable ? byte : 256 + extra++;
    std::string s;
    if (cp < 0x80) s.push_back(static_cast<char>(cp));
    else s = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    tokens.push_back(s);
  }
  for (const char* t : {"ab", "\xC4\xA0" "a", "<c>"}) tokens.push_back(t);
  std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
  put(b, 3, 4);
  put(b, 0, 8);
  put(b, 5, 8);
  put_str(b, "tokenizer.ggml.model");
  put(b, 8, 4);
  put_str(b, "gpt2");
  put_str(b, "tokenizer.ggml.pre");
  put(b, 8, 4);
  put_str(b, "smollm");
  put_str(b, "tokenizer.ggml.tokens");
  put(b, 9, 4);
  put(b, 8, 4);
  put(b, tokens.size(), 8);
  for (const auto& t : tokens) put_str(b, t);
  put_str(b, "tokenizer.ggml.token_type");
  put(b, 9, 4);
  put(b, 5, 4);
  put(b, tokens.size(), 8);
  for (size_t i = 0; i < tokens.size(); ++i) put(b, i + 1 == tokens.size() ? 3 : 1, 4);
  put_str(b, "tokenizer.ggml.merges");
  put(b, 9, 4);
  put(b, 8, 4);
  put(b, 2, 8);
  put_str(b, "a b");
  put_str(b, "\xC4\xA0 a");
  b.resize((b.size() + 31) / 32 * 32, 0);
  std::vector<std::byte> bytes(b.size());
  std::memcpy(bytes.data(), b.data(), b.size());
  return vkformer::GgufFile::from_bytes(std::move(bytes), "fuzz.gguf");
}

const vkformer::GgufTokenizer& small_tokenizer() {
  static const vkformer::GgufTokenizer t = vkformer::GgufTokenizer::from_gguf(small_vocab());
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  if (data[0] % 2 == 0) {
    const vkformer::GgufTokenizer& tok = small_tokenizer();
    const bool parse_special = data[1] % 2 == 1;
    const std::vector<int32_t> ids = tok.encode(rest, false, parse_special);
    if (vkformer::io::is_valid_utf8(rest) && tok.decode(ids) != rest) __builtin_trap();  // no byte lost
    vkformer::Utf8StreamDecoder stream;
    for (int32_t id : ids)
      if (!vkformer::io::is_valid_utf8(stream.push(tok.token_bytes(id)))) __builtin_trap();
    if (!vkformer::io::is_valid_utf8(stream.flush())) __builtin_trap();
    return 0;
  }
  try {
    std::vector<std::byte> bytes(rest.size());
    if (!rest.empty()) std::memcpy(bytes.data(), rest.data(), rest.size());
    const auto file = vkformer::GgufFile::from_bytes(std::move(bytes), "fuzz.gguf");
    const auto t = vkformer::GgufTokenizer::from_gguf(file);
    t.decode(t.encode("Hello, world! 123 caf\xc3\xa9 <|im_start|>\xff", data[1] % 2 == 1));
  } catch (const vkformer::Error&) {
  }
  return 0;
}
