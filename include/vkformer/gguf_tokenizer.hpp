#pragma once
// Tokenizers from a GGUF file's metadata, giving the same ids as llama.cpp's tokenizer for the
// same text. Three kinds of tokenizer.ggml.model:
//   "gpt2"   byte-level BPE: Llama 3, SmolLM2, Qwen2/2.5/3, GPT-2, DeepSeek, Falcon, ...
//   "llama"  SentencePiece BPE: Llama 2, Mistral, TinyLlama, Phi-3, Baichuan, ...
//   "gemma4" SentencePiece-style BPE (merges over UTF-8 with U+2581 for spaces): Gemma 4.
// Every vocabulary-only GGUF llama.cpp ships with test vectors gives llama.cpp's ids for all
// of them (tests/llama_vocab_test.cpp). (Its first name, BpeTokenizer, from before it read
// SentencePiece, stays as a deprecated alias in vkformer/bpe_tokenizer.hpp.)
//
//   vkformer::GgufFile file("SmolLM2-135M-Instruct.Q4_1.gguf");
//   auto tok = vkformer::GgufTokenizer::from_gguf(file);
//   std::vector<int32_t> ids = tok.encode("<|im_start|>user\nHi!<|im_end|>\n");
//
// encode() runs llama.cpp's steps:
//   1. special tokens: the vocabulary's control tokens (token type 3, and the end-of-turn
//      tokens llama.cpp recognizes by name), user-defined (4) and unknown (2) ones are found in
//      the raw text, longest token first, and become one id each; control and unknown tokens
//      only with parse_special, user-defined ones always; Phi-3's (by general.name) take the
//      spaces after them, as llama.cpp's per-model rule says;
//   2. BPE: the text between them is decoded from UTF-8 leniently (an invalid byte is U+FFFD),
//      cut into words by the pre-tokenizer tokenizer.ggml.pre names (see
//      supported_pre_tokenizers; llama.cpp's hand-written scanners ported, its other regexes run
//      through std::regex as llama.cpp runs them), each word's bytes mapped to GPT-2's printable
//      characters and merged by tokenizer.ggml.merges, lowest rank first;
//      SentencePiece: the text, with a space before it when it starts the input or follows a
//      special token (tokenizer.ggml.add_space_prefix, default true) and every space written
//      U+2581, merged pair by pair, the pair whose joined text is the token with the highest
//      tokenizer.ggml.scores first; what forms no token falls back to its bytes' <0xNN> tokens;
//   3. with add_special, BOS first and EOS last where the file's add_bos_token / add_eos_token
//      say (or llama.cpp's default: BOS for SentencePiece and the llama3 family).
//
// Unicode categories come from utf8proc, with what Unicode 15.1 added filled in: the classes of
// all 0x110000 code points equal llama.cpp's table (checked against the llama.cpp that
// tools/build_llama_cpp_peer.sh builds). Not supported: WordPiece ("bert"), Unigram ("t5"),
// RWKV and the other kinds (an unsupported-kind error names them), llama.cpp's per-model strip
// rules for jina-v2 and nomic-bert-moe masks, and the pre-tokenizers not named by
// supported_pre_tokenizers(). Sequences that decode past U+10FFFF, on which llama.cpp throws,
// are read as invalid bytes (U+FFFD each). Where wchar_t has 16 bits (Windows) the regex-run
// pre-tokenizers see code points above U+FFFF cut to 16 bits, as llama.cpp's do there.
//
// Errors are vkformer::Error: a file whose tokenizer is not of these kinds (another
// tokenizer.ggml.model, an unknown tokenizer.ggml.pre) is unsupported, naming the value and the
// supported ones; inconsistent metadata (arrays of different lengths, a merge naming a missing
// token, ids out of range, duplicate tokens) is format, naming the key.
//
// A GgufTokenizer is immutable: copies share their tables, and any number of threads may use one
// at the same time. A moved-from one throws invalid_argument.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vkformer {

class GgufFile;

class GgufTokenizer {
 public:
  static GgufTokenizer from_gguf(const GgufFile& file);
  // Opens a GGUF file (a model or a vocabulary-only file) and reads its tokenizer.
  static GgufTokenizer load(const std::filesystem::path& gguf);

  // The ids of `text` (any bytes; invalid UTF-8 is read as U+FFFD, as llama.cpp does).
  std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;

  // The bytes the ids stand for, one token after the other: token_bytes of each, so a control
  // token gives its own text ("<|im_end|>"). Unlike llama.cpp's detokenizer it does not tidy
  // spaces before punctuation, so decode(encode(text, false)) == text for valid UTF-8 text
  // without special tokens, and streaming token_bytes through a Utf8StreamDecoder gives the
  // same text. For SentencePiece, as llama.cpp, one leading space of the first token's bytes
  // is dropped (the space encode() put before the text). Throws invalid_argument for an id
  // outside the vocabulary.
  std::string decode(std::span<const int32_t> ids) const;
  // What one token stands for: its bytes (a normal token's characters mapped back through
  // GPT-2's byte map, or with U+2581 as a space for SentencePiece), the text of a control, user-defined or unknown token, the byte of a
  // <0xNN> byte token, nothing for an unused one. Possibly part of a UTF-8 character.
  const std::string& token_bytes(int32_t id) const;

  const std::string& id_to_token(int32_t id) const;  // the vocabulary's string, e.g. "Ġthe"
  std::optional<int32_t> token_to_id(std::string_view token) const;
  size_t vocab_size() const;
  int32_t bos_id() const;  // -1 when the file has none
  int32_t eos_id() const;  // -1 when the file has none
  int32_t eot_id() const;  // end of turn (tokenizer.ggml.eot_token_id, or found by name), or -1
  // Whether generation ends at this token, as llama.cpp decides: EOS, EOT, EOM, and the tokens
  // it recognizes by their text (<|im_end|>, <|endoftext|>, <|eot_id|>, <|end|>, ...).
  bool is_end_of_generation(int32_t id) const;
  // Whether a token is control or unknown: encode() finds such tokens in text only with
  // parse_special.
  bool is_control(int32_t id) const;
  bool add_bos() const;
  bool add_eos() const;
  const std::string& pre_tokenizer() const;  // tokenizer.ggml.pre ("default" when absent)

  // The tokenizer.ggml.pre values from_gguf accepts, comma-separated.
  static std::string supported_pre_tokenizers();

 private:
  struct Impl;
  explicit GgufTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const Impl& impl() const;
  std::shared_ptr<const Impl> impl_;
};

// Turns a stream of bytes (token_bytes of generated tokens) into text that is always valid
// UTF-8: push() returns the complete characters so far and holds back the start of a character
// split across pushes; bytes that cannot become valid UTF-8 come out as U+FFFD right away (one
// per maximal invalid subsequence, as the WHATWG decoder counts them). flush() returns what is
// held back, as U+FFFD, and starts over; discard() drops it instead (a stream cut off inside a
// character shows nothing of it) and says how many bytes it dropped.
class Utf8StreamDecoder {
 public:
  std::string push(std::string_view bytes);
  std::string flush();
  size_t discard();
  bool holds_back() const { return needed_ > 0; }  // the start of a character is held back

 private:
  std::string pending_;      // the bytes of an incomplete character
  unsigned needed_ = 0;      // continuation bytes still expected
  unsigned char lower_ = 0x80, upper_ = 0xBF;  // the allowed range of the next byte
};

}  // namespace vkformer
