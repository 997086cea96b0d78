// libFuzzer harness for the WordPiece tokenizer (src/text/): the first byte picks what the rest
// is. Even: text to encode with a small fixed vocabulary (UTF-8 checks, BERT normalization,
// pre-tokenization, WordPiece, truncation to the second byte as max_length). Odd: the contents of
// a tokenizer.json, loaded from a file and then used. A vkformer::Error is the expected answer to
// bad input; a crash, a sanitizer report, a leak or any other exception is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "vkformer/error.hpp"
#include "vkformer/tokenizer.hpp"

namespace {

const vkformer::WordPieceTokenizer& small_tokenizer() {
  static const vkformer::WordPieceTokenizer t = vkformer::WordPieceTokenizer::from_vocab(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "un", "##aff", "##able", "a", "##b",
       "caf", "##e", "\xe4\xb8\xad", ",", ".", "!", "1", "##2", "hello", "world"});
  return t;
}

// The tokenizer.json text in a file of its own (load() reads files only).
std::string write_temp(std::string_view text) {
  char path[] = "/tmp/vkformer_fuzz_tokenizer_XXXXXX.json";
  const int fd = mkstemps(path, 5);
  if (fd < 0) __builtin_trap();
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) __builtin_trap();
    done += static_cast<size_t>(n);
  }
  close(fd);
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  if (data[0] % 2 == 0) {
    try {
      const auto e = small_tokenizer().encode(rest, data[1]);
      if (data[1] >= 2 && e.ids.size() > data[1]) __builtin_trap();  // truncation broken
    } catch (const vkformer::Error&) {
    }
    return 0;
  }
  const std::string path = write_temp(rest);
  try {
    const auto t = vkformer::WordPieceTokenizer::load(path);
    t.encode("Hello, world! caf\xc3\xa9 \xe4\xb8\xad", data[1]);
  } catch (const vkformer::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
