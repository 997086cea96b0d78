#include "tokenizer_files.hpp"

#include <algorithm>
#include <limits>
#include <string_view>
#include <system_error>

#include "../io/io_util.hpp"
#include "../platform/file_access.hpp"
#include "json_keys.hpp"
#include "vkformer/error.hpp"

namespace vkformer::text {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxCharsPerWord = int64_t{1} << 20;

void add_unique(std::vector<std::string>& list, const std::string& token) {
  if (std::find(list.begin(), list.end(), token) == list.end()) list.push_back(token);
}

// model.vocab: {token: id} with the ids 0..n-1, each once.
std::vector<std::string> read_vocab_object(const JsonKeys& model) {
  const json& vocab = model.object("vocab");
  if (vocab.empty()) model.fail("vocab", "empty");
  if (static_cast<int64_t>(vocab.size()) > kMaxVocab)
    model.fail("vocab", std::to_string(vocab.size()) + " tokens, more than vkformer reads (" +
                            std::to_string(kMaxVocab) + ")");
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    const std::string where = "vocab[" + quote_text(token) + "]";
    if (!id.is_number_integer()) model.fail(where, "expected an integer id, got " + describe(id));
    int64_t i = id.get<int64_t>();
    if (id.is_number_unsigned() ? id.get<uint64_t>() >= vocab.size()
                                : i < 0 || i >= static_cast<int64_t>(vocab.size()))
      model.fail(where, "id " + id.dump() + " is outside 0.." + std::to_string(vocab.size() - 1) +
                            " (ids must number the tokens without gaps)");
    if (seen[static_cast<size_t>(i)])
      model.fail(where, "id " + std::to_string(i) + " is also the id of " +
                            quote_text(tokens[static_cast<size_t>(i)]));
    seen[static_cast<size_t>(i)] = true;
    tokens[static_cast<size_t>(i)] = token;
  }
  return tokens;
}

void read_normalizer(const JsonKeys& root, WordPieceConfig& config) {
  if (!root.has("normalizer")) {  // null: the text is used as it is
    config.clean_text = config.handle_chinese_chars = config.lowercase = false;
    config.strip_accents = false;
    return;
  }
  JsonKeys n = root.child("normalizer");
  std::string type = n.string("type", std::nullopt);
  if (type != "BertNormalizer")
    n.fail("type",
           quote_text(type) + " is not supported (vkformer's WordPiece reads BertNormalizer)");
  config.clean_text = n.boolean("clean_text", true);
  config.handle_chinese_chars = n.boolean("handle_chinese_chars", true);
  config.lowercase = n.boolean("lowercase", true);
  config.strip_accents = n.optional_boolean("strip_accents");
}

void read_pre_tokenizer(const JsonKeys& root) {
  JsonKeys p = root.child("pre_tokenizer");
  std::string type = p.string("type", std::nullopt);
  if (type != "BertPreTokenizer")
    p.fail("type",
           quote_text(type) + " is not supported (vkformer's WordPiece reads BertPreTokenizer)");
}

// [CLS] $A [SEP], as TemplateProcessing or BertProcessing writes it.
void read_post_processor(const JsonKeys& root, WordPieceConfig& config) {
  JsonKeys p = root.child("post_processor");
  std::string type = p.string("type", std::nullopt);
  if (type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const json& pair = p.array(key);
      if (pair.size() != 2 || !pair[0].is_string())
        p.fail(key, "expected [token, id], got " + describe(pair));
      (std::string(key) == "cls" ? config.cls_token : config.sep_token) =
          pair[0].get<std::string>();
    }
    return;
  }
  if (type != "TemplateProcessing")
    p.fail("type", quote_text(type) +
                       " is not supported (vkformer reads TemplateProcessing and BertProcessing)");
  const json& single = p.array("single");
  auto special = [&](size_t i) -> std::string {
    const json& item = single[i];
    if (item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object() &&
        item["SpecialToken"].contains("id") && item["SpecialToken"]["id"].is_string())
      return item["SpecialToken"]["id"].get<std::string>();
    p.fail("single[" + std::to_string(i) + "]",
           "expected {\"SpecialToken\": {\"id\": ...}}, got " + describe(item));
  };
  bool shape_ok = single.size() == 3 && single[1].is_object() && single[1].contains("Sequence");
  if (!shape_ok)
    p.fail("single", "only [CLS] $A [SEP] is supported (a special token, the sequence, a "
                     "special token), got " + describe(single));
  config.cls_token = special(0);
  config.sep_token = special(2);
}

// Each added token must be the vocabulary's token of the id it gives.
void read_added_tokens(const JsonKeys& root, const std::vector<std::string>& vocab,
                       WordPieceConfig& config) {
  config.added_tokens.clear();
  if (!root.has("added_tokens")) return;
  const json& list = root.array("added_tokens");
  for (size_t i = 0; i < list.size(); ++i) {
    JsonKeys t(list[i], root.file(), "added_tokens[" + std::to_string(i) + "]");
    std::string content = t.string("content", std::nullopt);
    if (content.empty()) t.fail("content", "empty");
    // Matching with these options (around whitespace, on normalized text) is not implemented:
    // refuse rather than tokenize differently from Hugging Face.
    for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"})
      if (t.boolean(flag, false))
        t.fail(flag, "true is not supported for " + quote_text(content) +
                         " (vkformer matches added tokens exactly, in the raw text)");
    int64_t id = t.integer("id", std::nullopt, 0, kMaxVocab);
    if (id >= static_cast<int64_t>(vocab.size()) || vocab[static_cast<size_t>(id)] != content)
      t.fail("id", std::to_string(id) + " is not the id of " + quote_text(content) +
                       " in model.vocab");
    add_unique(config.added_tokens, content);
  }
}

}  // namespace

TokenizerFiles read_tokenizer_json(const fs::path& path) {
  json doc = read_json_file(path);
  TokenizerFiles out;
  out.source = path.string();
  JsonKeys root(doc, out.source, "");
  JsonKeys model = root.child("model");
  std::string type = model.string("type", "WordPiece");
  if (type != "WordPiece")
    model.fail("type", quote_text(type) + " is not supported (vkformer reads WordPiece models)");
  out.vocab = read_vocab_object(model);
  WordPieceConfig& c = out.config;
  c.unk_token = model.string("unk_token", std::nullopt);
  c.continuing_subword_prefix = model.string("continuing_subword_prefix", "##");
  c.max_input_chars_per_word =
      static_cast<size_t>(model.integer("max_input_chars_per_word", 100, 0, kMaxCharsPerWord));
  read_normalizer(root, c);
  read_pre_tokenizer(root);
  read_post_processor(root, c);
  read_added_tokens(root, out.vocab, c);
  if (root.has("padding")) c.pad_token = root.child("padding").string("pad_token", c.pad_token);
  if (root.has("truncation"))
    c.model_max_length = static_cast<size_t>(
        root.child("truncation").integer("max_length", 0, 0, std::numeric_limits<int32_t>::max()));
  return out;
}

namespace {

// "[UNK]" or {"content": "[UNK]", ...} (transformers' serialized AddedToken).
std::string token_content(const json& v, const std::string& file, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) return JsonKeys(v, file, path).string("content", std::nullopt);
  throw Error(
      ErrorCode::format,
      file + ": " + path + ": expected a token string or {\"content\": ...}, got " + describe(v));
}

std::optional<std::string> special_token(const JsonKeys& keys, const std::string& key) {
  if (!keys.has(key)) return std::nullopt;  // null: no such token
  return token_content(keys.value().at(key), keys.file(), keys.key_path(key));
}

// unk/cls/sep/pad/mask_token and additional_special_tokens; `mask` receives mask_token.
void read_special_tokens(const JsonKeys& keys, WordPieceConfig& c, std::string& mask) {
  if (auto t = special_token(keys, "unk_token")) c.unk_token = *t;
  if (auto t = special_token(keys, "cls_token")) c.cls_token = *t;
  if (auto t = special_token(keys, "sep_token")) c.sep_token = *t;
  if (auto t = special_token(keys, "pad_token")) c.pad_token = *t;
  if (auto t = special_token(keys, "mask_token")) mask = *t;
  if (keys.has("additional_special_tokens")) {
    const json& list = keys.array("additional_special_tokens");
    for (size_t i = 0; i < list.size(); ++i) {
      add_unique(c.added_tokens, token_content(list[i], keys.file(),
                                               keys.key_path("additional_special_tokens[" +
                                                             std::to_string(i) + "]")));
    }
  }
}

}  // namespace

bool file_present(const fs::path& path) {
  // Not std::filesystem::status: on Windows it calls NUL or a named pipe missing.
  const platform::PathStatus st = platform::path_status(path, /*follow_links=*/true);
  if (!st.error.empty()) throw Error(ErrorCode::io, path.string() + ": cannot access: " + st.error);
  return st.kind != platform::FileKind::missing;
}

size_t read_model_max_length(const fs::path& tokenizer_config) {
  json doc = read_json_file(tokenizer_config);
  JsonKeys keys(doc, tokenizer_config.string(), "");
  if (!keys.has("model_max_length")) return 0;
  const json& v = doc["model_max_length"];
  if (!v.is_number()) keys.fail("model_max_length", "expected a number, got " + describe(v));
  // transformers writes 1e30 (VERY_LARGE_INTEGER) for "no limit".
  double n = v.get<double>();
  if (n < 0 || n > std::numeric_limits<int32_t>::max()) return 0;
  return static_cast<size_t>(n);
}

TokenizerFiles read_vocab_txt(const fs::path& vocab_path, const fs::path& config_dir) {
  TokenizerFiles out;
  out.source = vocab_path.string();
  // Read, not mapped: a file truncated while mapped would end the process with SIGBUS.
  io::FileBytes file = io::FileBytes::open(vocab_path, false, kMaxTokenizerFileBytes);
  std::string_view text(reinterpret_cast<const char*>(file.bytes().data()), file.bytes().size());
  // One token per line, as transformers' load_vocab reads it: only the line break is removed
  // (and a last line without one is a token too).
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.vocab.emplace_back(line);
    if (static_cast<int64_t>(out.vocab.size()) > kMaxVocab)
      throw Error(ErrorCode::format, out.source + ": more than " + std::to_string(kMaxVocab) +
                                         " lines: not a vocabulary vkformer reads");
  }
  if (out.vocab.empty()) throw Error(ErrorCode::format, out.source + ": empty (no tokens)");

  // BertTokenizerFast built from these files: BertNormalizer with clean_text always on.
  WordPieceConfig& c = out.config;
  c.added_tokens.clear();
  std::string mask = "[MASK]";
  fs::path config_path = config_dir / "tokenizer_config.json";
  if (file_present(config_path)) {
    json doc = read_json_file(config_path);
    JsonKeys keys(doc, config_path.string(), "");
    c.lowercase = keys.boolean("do_lower_case", true);
    c.strip_accents = keys.optional_boolean("strip_accents");
    c.handle_chinese_chars = keys.boolean("tokenize_chinese_chars", true);
    read_special_tokens(keys, c, mask);
    if (keys.has("added_tokens_decoder")) {
      (void)keys.object("added_tokens_decoder");  // an object, or a format error naming it
      for (const auto& [id, token] : doc["added_tokens_decoder"].items())
        add_unique(c.added_tokens,
                   token_content(token, keys.file(),
                                 keys.key_path("added_tokens_decoder[" + quote_text(id) + "]")));
    }
    c.model_max_length = read_model_max_length(config_path);
  }
  fs::path map_path = config_dir / "special_tokens_map.json";
  if (file_present(map_path)) {
    json doc = read_json_file(map_path);
    read_special_tokens(JsonKeys(doc, map_path.string(), ""), c, mask);
  }
  for (const std::string* t : {&c.pad_token, &c.unk_token, &c.cls_token, &c.sep_token})
    add_unique(c.added_tokens, *t);
  // transformers would give a [MASK] missing from vocab.txt a new id; vkformer leaves it out.
  if (std::find(out.vocab.begin(), out.vocab.end(), mask) != out.vocab.end())
    add_unique(c.added_tokens, mask);
  return out;
}

}  // namespace vkformer::text
