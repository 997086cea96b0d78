#pragma once
// BERT's WordPiece tokenizer, as Hugging Face's `tokenizers` runs it (BertTokenizerFast): the
// same ids and tokens for the same text. No Vulkan here: it runs on the host, before a model.
//
//   auto tok = vkformer::WordPieceTokenizer::load("all-MiniLM-L6-v2/");
//   vkformer::Encoding e = tok.encode("Hello, world!", 128);  // [CLS] hello , world ! [SEP]
//
// The steps, each as tokenizer.json names it:
//   1. added tokens: the special tokens ([CLS], [SEP], [MASK], ...) are found in the raw text
//      first and kept whole; the text between them goes through steps 2-4;
//   2. BertNormalizer: clean text (control characters removed, every whitespace becomes ' '),
//      CJK ideographs split off, accents stripped (NFD, then nonspacing marks dropped),
//      lower-casing;
//   3. BertPreTokenizer: words split at whitespace and at each punctuation character;
//   4. WordPiece: greedy longest match from the start of each word, later pieces with "##";
//      a word that cannot be covered, or longer than max_input_chars_per_word, is [UNK];
//   5. [CLS] pieces [SEP], after keeping the first max_length - 2 pieces.
//
// Unicode properties (categories, NFD, lower case) come from utf8proc. Hugging Face's tables
// are older, so the two can differ for the few hundred characters assigned or re-categorised
// since Unicode 9 (e.g. U+2E43..U+2E5D are punctuation here and plain symbols there).
//
// Errors are vkformer::Error: text that is not UTF-8 is invalid_argument naming the byte
// offset; an unreadable file is io, as is one that is not a regular file (a FIFO, a device, a
// directory) or is larger than 256 MiB, naming the file and what it is; a malformed file (bad
// JSON, JSON nested more than 64 deep, a key of the wrong type, a vocab without its unknown
// token) is format, naming the file and the key.
//
// A WordPieceTokenizer is immutable once loaded: copies share their tables, and any number of
// threads may encode with one at the same time. A moved-from one throws invalid_argument.
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

// One encoded text: [CLS] wordpieces [SEP], then padding in encode_batch.
struct Encoding {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;      // the vocabulary's strings: "[CLS]", "play", "##ing"
  std::vector<int32_t> type_ids;        // 0 everywhere: one sequence
  std::vector<int32_t> attention_mask;  // 1 for a token, 0 for padding
  size_t size() const { return ids.size(); }
};

// How a WordPiece tokenizer normalizes, splits and marks text: tokenizer.json's BertNormalizer
// and WordPiece model, or tokenizer_config.json's do_lower_case, strip_accents, ...
struct WordPieceConfig {
  bool clean_text = true;            // drop control characters, whitespace becomes ' '
  bool handle_chinese_chars = true;  // each CJK ideograph is a word of its own
  bool lowercase = true;
  std::optional<bool> strip_accents;  // unset: strip them when lower-casing (BERT's rule)
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;  // longer words become the unknown token; at most 100000
  std::string unk_token = "[UNK]";
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  // Tokens matched in the raw text before normalization and never split: the special tokens.
  // Each must be in the vocabulary.
  std::vector<std::string> added_tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  // The longest input the model was trained for, as the files say (tokenizer_config.json's
  // model_max_length, else tokenizer.json's truncation); 0 when they do not. Informative only:
  // encode() truncates to the max_length it is given.
  size_t model_max_length = 0;
};

class WordPieceTokenizer {
 public:
  // Reads a tokenizer from
  //   - a directory: its tokenizer.json, or else its vocab.txt (see below);
  //   - a tokenizer.json file (a WordPiece model with BertNormalizer and BertPreTokenizer);
  //   - a vocab.txt file (one token per line, the line number is the id), with the settings of
  //     tokenizer_config.json beside it when there is one (and special_tokens_map.json).
  // In a directory, tokenizer_config.json's model_max_length is read in both cases.
  static WordPieceTokenizer load(const std::filesystem::path& path);

  // A tokenizer from a vocabulary in memory: token i has id i. Throws invalid_argument for a
  // duplicate or empty token, or a special token of the config missing from the vocabulary.
  static WordPieceTokenizer from_vocab(std::vector<std::string> vocab, WordPieceConfig config = {});

  // [CLS] wordpieces [SEP]. With max_length > 0, only the first max_length - 2 wordpieces are
  // kept, so the result has at most max_length tokens (max_length 1 is invalid_argument: it
  // cannot hold [CLS] and [SEP]). 0 keeps everything.
  Encoding encode(std::string_view text, size_t max_length = 0) const;

  // encode() of each text, padded at the end with [PAD] (attention mask 0) to the longest.
  std::vector<Encoding> encode_batch(std::span<const std::string> texts,
                                     size_t max_length = 0) const;

  // The wordpieces of a text, without [CLS] and [SEP] and without truncation.
  std::vector<std::string> tokenize(std::string_view text) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string& id_to_token(int32_t id) const;  // invalid_argument outside the vocabulary
  size_t vocab_size() const;
  int32_t unk_id() const;
  int32_t cls_id() const;
  int32_t sep_id() const;
  int32_t pad_id() const;
  const WordPieceConfig& config() const;

 private:
  struct Impl;
  explicit WordPieceTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  static std::shared_ptr<const Impl> build(std::vector<std::string> vocab, WordPieceConfig config,
                                           bool from_files, const std::string& source);
  const Impl& impl() const;  // throws on a moved-from WordPieceTokenizer
  std::shared_ptr<const Impl> impl_;
};

}  // namespace vkformer
