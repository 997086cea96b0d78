// The public WordPieceTokenizer: added tokens, then normalizer, pre-tokenizer and WordPiece for
// the text between them, then truncation and [CLS] ... [SEP].
#include <algorithm>
#include <cstdint>
#include <memory>

#include "added_tokens.hpp"
#include "bert_normalizer.hpp"
#include "bert_pre_tokenizer.hpp"
#include "json_keys.hpp"
#include "tokenizer_files.hpp"
#include "utf8.hpp"
#include "vkformer/error.hpp"
#include "vkformer/tokenizer.hpp"
#include "wordpiece_model.hpp"

namespace vkformer {

namespace fs = std::filesystem;

struct WordPieceTokenizer::Impl {
  WordPieceConfig config;
  text::WordPieceModel model;
  std::vector<text::AddedToken> added;
  int32_t cls_id, sep_id, pad_id;

  // The ids of the text's wordpieces, without [CLS] and [SEP].
  std::vector<int32_t> wordpiece_ids(std::string_view utf8) const {
    std::vector<int32_t> ids;
    text::decode_utf8(utf8, "tokenizer");  // the whole text, so offsets are the caller's
    for (const text::TextSegment& segment : text::split_added_tokens(utf8, added)) {
      if (segment.added_id >= 0) {
        ids.push_back(segment.added_id);
        continue;
      }
      std::u32string normalized =
          text::bert_normalize(text::decode_utf8(segment.text, "tokenizer"), config);
      for (std::u32string_view word : text::bert_pre_tokenize(normalized))
        model.tokenize_word(word, ids);
    }
    return ids;
  }
};

namespace {

// A word longer than this is one [UNK] in every tokenizer seen (they say 100 or 200); the limit
// bounds what a hostile tokenizer.json can make one word cost (wordpiece_model.hpp).
constexpr size_t kMaxInputCharsPerWord = 100000;

// The id of `token`, which the tokenizer needs: its last line in the vocabulary, as the model's
// map has it. Throws `code` naming `source` and the token's role when it is missing.
int32_t required_id(const std::vector<std::string>& vocab, const std::string& token,
                    const char* role, ErrorCode code, const std::string& source) {
  auto it = std::find(vocab.rbegin(), vocab.rend(), token);
  if (it == vocab.rend())
    throw Error(code, source + ": the " + role + " " + text::quote_text(token) +
                          " is not in the vocabulary (" + std::to_string(vocab.size()) +
                          " tokens)");
  return static_cast<int32_t>(vocab.rend() - it - 1);
}

}  // namespace

// Files that do not fit together are format errors; a vocabulary given in code, invalid_argument.
std::shared_ptr<const WordPieceTokenizer::Impl> WordPieceTokenizer::build(
    std::vector<std::string> vocab, WordPieceConfig config, bool from_files,
    const std::string& source) {
  ErrorCode code = from_files ? ErrorCode::format : ErrorCode::invalid_argument;
  if (vocab.empty()) throw Error(code, source + ": the vocabulary is empty");
  if (vocab.size() > static_cast<size_t>(INT32_MAX))
    throw Error(code, source + ": the vocabulary has more than 2^31 - 1 tokens");
  int32_t unk = required_id(vocab, config.unk_token, "unknown token", code, source);
  int32_t cls = required_id(vocab, config.cls_token, "classifier token", code, source);
  int32_t sep = required_id(vocab, config.sep_token, "separator token", code, source);
  int32_t pad = required_id(vocab, config.pad_token, "padding token", code, source);
  std::vector<text::AddedToken> added;
  for (const std::string& t : config.added_tokens) {
    if (t.empty()) throw Error(code, source + ": an added token is empty");
    added.push_back({t, required_id(vocab, t, "added token", code, source)});
  }
  std::string prefix = config.continuing_subword_prefix;
  size_t max_chars = config.max_input_chars_per_word;
  if (max_chars > kMaxInputCharsPerWord)
    throw Error(code, source + ": max_input_chars_per_word is " + std::to_string(max_chars) +
                          ", more than the " + std::to_string(kMaxInputCharsPerWord) +
                          " vkformer allows (Hugging Face's default is 100; longer words become the "
                          "unknown token)");
  return std::make_shared<const Impl>(Impl{
      std::move(config), text::WordPieceModel(std::move(vocab), unk, std::move(prefix), max_chars),
      std::move(added), cls, sep, pad});
}

const WordPieceTokenizer::Impl& WordPieceTokenizer::impl() const {
  if (!impl_)
    throw Error(ErrorCode::invalid_argument,
                "WordPieceTokenizer: this tokenizer was moved from; use the one it was moved to");
  return *impl_;
}

WordPieceTokenizer WordPieceTokenizer::from_vocab(std::vector<std::string> vocab,
                                                  WordPieceConfig config) {
  return WordPieceTokenizer(
      build(std::move(vocab), std::move(config), false, "WordPieceTokenizer::from_vocab"));
}

WordPieceTokenizer WordPieceTokenizer::load(const fs::path& path) {
  // A link loop or a directory that cannot be searched is said as such, not as "no such file".
  if (!text::file_present(path))
    throw Error(ErrorCode::io, path.string() +
                                   ": no such file or directory (expected a tokenizer "
                                   "directory, tokenizer.json or vocab.txt)");
  std::error_code ec;
  text::TokenizerFiles files;
  // What is not a directory is read as a file, which says when it is not a regular one.
  if (fs::is_directory(path, ec)) {
    if (text::file_present(path / "tokenizer.json"))
      files = text::read_tokenizer_json(path / "tokenizer.json");
    else if (text::file_present(path / "vocab.txt"))
      files = text::read_vocab_txt(path / "vocab.txt", path);
    else
      throw Error(ErrorCode::io, path.string() + ": has neither tokenizer.json nor vocab.txt");
    // transformers takes the limit from tokenizer_config.json whichever file holds the vocab.
    if (text::file_present(path / "tokenizer_config.json"))
      if (size_t n = text::read_model_max_length(path / "tokenizer_config.json"))
        files.config.model_max_length = n;
  } else if (path.extension() == ".json") {
    files = text::read_tokenizer_json(path);
  } else {
    files = text::read_vocab_txt(path, path.parent_path());
  }
  return WordPieceTokenizer(
      build(std::move(files.vocab), std::move(files.config), true, files.source));
}

Encoding WordPieceTokenizer::encode(std::string_view text, size_t max_length) const {
  if (max_length == 1)
    throw Error(ErrorCode::invalid_argument,
                "tokenizer: max_length 1 cannot hold [CLS] and [SEP] (use 0 for no limit)");
  const Impl& m = impl();
  std::vector<int32_t> pieces = m.wordpiece_ids(text);
  if (max_length > 0 && pieces.size() > max_length - 2) pieces.resize(max_length - 2);

  Encoding e;
  e.ids.reserve(pieces.size() + 2);
  e.ids.push_back(m.cls_id);
  e.ids.insert(e.ids.end(), pieces.begin(), pieces.end());
  e.ids.push_back(m.sep_id);
  e.tokens.reserve(e.ids.size());
  for (int32_t id : e.ids) e.tokens.push_back(m.model.tokens()[static_cast<size_t>(id)]);
  e.type_ids.assign(e.ids.size(), 0);
  e.attention_mask.assign(e.ids.size(), 1);
  return e;
}

std::vector<Encoding> WordPieceTokenizer::encode_batch(std::span<const std::string> texts,
                                                       size_t max_length) const {
  std::vector<Encoding> out;
  out.reserve(texts.size());
  size_t longest = 0;
  for (const std::string& t : texts) {
    out.push_back(encode(t, max_length));
    longest = std::max(longest, out.back().size());
  }
  const Impl& m = impl();
  const std::string& pad = m.model.tokens()[static_cast<size_t>(m.pad_id)];
  for (Encoding& e : out) {
    size_t n = longest - e.size();
    e.ids.insert(e.ids.end(), n, m.pad_id);
    e.tokens.insert(e.tokens.end(), n, pad);
    e.type_ids.insert(e.type_ids.end(), n, 0);
    e.attention_mask.insert(e.attention_mask.end(), n, 0);
  }
  return out;
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> tokens;
  const Impl& m = impl();
  for (int32_t id : m.wordpiece_ids(text))
    tokens.push_back(m.model.tokens()[static_cast<size_t>(id)]);
  return tokens;
}

std::optional<int32_t> WordPieceTokenizer::token_to_id(std::string_view token) const {
  return impl().model.find(token);
}

const std::string& WordPieceTokenizer::id_to_token(int32_t id) const {
  const std::vector<std::string>& tokens = impl().model.tokens();
  if (id < 0 || static_cast<size_t>(id) >= tokens.size())
    throw Error(ErrorCode::invalid_argument, "tokenizer: id " + std::to_string(id) +
                                                 " is outside the vocabulary (0.." +
                                                 std::to_string(tokens.size() - 1) + ")");
  return tokens[static_cast<size_t>(id)];
}

size_t WordPieceTokenizer::vocab_size() const { return impl().model.tokens().size(); }
int32_t WordPieceTokenizer::unk_id() const { return impl().model.unk_id(); }
int32_t WordPieceTokenizer::cls_id() const { return impl().cls_id; }
int32_t WordPieceTokenizer::sep_id() const { return impl().sep_id; }
int32_t WordPieceTokenizer::pad_id() const { return impl().pad_id; }
const WordPieceConfig& WordPieceTokenizer::config() const { return impl().config; }

}  // namespace vkformer
