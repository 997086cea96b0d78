#include "bert/bert_config.hpp"

#include <nlohmann/json.hpp>
#include <set>

#include "../io/io_util.hpp"
#include "../text/json_keys.hpp"
#include "vkformer/error.hpp"

namespace vkformer::models::bert {

namespace {

using json = nlohmann::json;

// The keys parse() reads, and PretrainedConfig's bookkeeping, generation and fine-tuning keys,
// none of which changes an encoder's forward pass (dropout is the identity at inference).
const std::set<std::string> kKnown = {
    "_name_or_path", "architectures", "transformers_version", "torch_dtype",
    "gradient_checkpointing", "use_cache", "initializer_range", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "classifier_dropout", "pad_token_id", "bos_token_id",
    "eos_token_id", "sep_token_id", "decoder_start_token_id", "id2label", "label2id",
    "num_labels", "problem_type", "finetuning_task", "tokenizer_class", "prefix",
    "task_specific_params", "output_hidden_states", "output_attentions", "return_dict",
    "torchscript", "use_bfloat16", "tie_word_embeddings", "tie_encoder_decoder", "pruned_heads",
    "chunk_size_feed_forward", "output_past", "max_length", "min_length", "do_sample",
    "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty", "temperature",
    "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "forced_bos_token_id", "forced_eos_token_id",
    "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens", "cross_attention_hidden_size", "tf_legacy_loss",
    "model_type", "position_embedding_type", "is_decoder", "add_cross_attention",
    "is_encoder_decoder", "layer_norm_eps", "hidden_act",
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "intermediate_size", "max_position_embeddings", "type_vocab_size"};

// A config.json is one object of a few dozen keys (~600 bytes for all-MiniLM-L6-v2); these
// bound what a hostile file can cost. nlohmann parses with an explicit stack, but copying or
// freeing a value recurses once per level, so nesting is limited while parsing.
constexpr uint64_t kMaxConfigBytes = 16u << 20;
constexpr int kMaxNesting = 64;

// A key or string from the file for a message: double-quoted as JSON writes it (control
// characters escaped), cut short after 64 bytes with its length.
std::string quote_json(const std::string& s) {
  constexpr size_t kMax = 64;
  std::string out = json(s.substr(0, kMax)).dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > kMax) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

// A value from the file for a message: strings quoted and cut short, arrays and objects by their
// size, never dumped whole (they may be huge or deeply nested).
std::string short_dump(const json& v) {
  if (v.is_string()) return quote_json(v.get_ref<const std::string&>());
  return text::describe(v);
}

}  // namespace

BertConfig BertConfig::parse(const std::string& text, const std::string& source) {
  json j;
  struct TooDeep {};
  auto limit_depth = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxNesting)
      throw TooDeep{};
    return true;
  };
  try {
    j = json::parse(text, limit_depth);
  } catch (const json::exception& e) {  // parse errors, and numbers beyond a double (1e400)
    throw Error(ErrorCode::format, source + ": not valid JSON: " + e.what());
  } catch (const TooDeep&) {
    throw Error(ErrorCode::format, source + ": arrays and objects nested more than " +
                                       std::to_string(kMaxNesting) +
                                       " deep; a BERT config.json nests 2 or 3 levels");
  }
  if (!j.is_object()) throw Error(ErrorCode::format, source + ": the top level is not an object");
  auto fail = [&](ErrorCode code, const std::string& key, const std::string& what) -> void {
    throw Error(code, source + ": " + quote_json(key) + ": " + what);
  };

  auto string = [&](const char* key, const std::string& fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_string()) fail(ErrorCode::format, key, "expected a string, got " + short_dump(j[key]));
    return j[key].get<std::string>();
  };
  auto integer = [&](const char* key, int64_t fallback, int64_t lo, int64_t hi) {
    if (!j.contains(key)) return fallback;
    const json& v = j[key];
    if (!v.is_number_integer())
      fail(ErrorCode::format, key, "expected an integer, got " + short_dump(v));
    const bool negative = v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0;
    if (negative || v.get<uint64_t>() < static_cast<uint64_t>(lo) || v.get<uint64_t>() > static_cast<uint64_t>(hi))
      fail(ErrorCode::format, key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                       "], got " + short_dump(v));
    return v.get<int64_t>();
  };
  auto boolean = [&](const char* key, bool fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_boolean()) fail(ErrorCode::format, key, "expected true or false, got " + short_dump(j[key]));
    return j[key].get<bool>();
  };

  const std::string type = string("model_type", "");
  if (type != "bert")
    fail(ErrorCode::unsupported, "model_type",
         type.empty() ? "missing: this loader reads BERT models (model_type \"bert\")"
                      : quote_json(type) + " is not supported: this loader reads BERT models (\"bert\")");
  for (auto& [key, value] : j.items())
    if (!kKnown.count(key))
      fail(ErrorCode::unsupported, key,
           "unknown key (value " + short_dump(value) +
               "): vkformer cannot tell whether it changes the model's math, so it refuses it");
  const std::string position = string("position_embedding_type", "absolute");
  if (position != "absolute")
    fail(ErrorCode::unsupported, "position_embedding_type",
         quote_json(position) + " is not supported: only \"absolute\" (learned) position embeddings are");
  if (boolean("is_decoder", false))
    fail(ErrorCode::unsupported, "is_decoder", "true is not supported: only encoders are");
  if (boolean("add_cross_attention", false))
    fail(ErrorCode::unsupported, "add_cross_attention", "true is not supported: only encoders are");
  if (boolean("is_encoder_decoder", false))
    fail(ErrorCode::unsupported, "is_encoder_decoder", "true is not supported: only encoders are");

  BertConfig c;
  const int64_t big = int64_t{1} << 24;
  c.vocab_size = integer("vocab_size", c.vocab_size, 1, INT32_MAX);
  c.hidden_size = integer("hidden_size", c.hidden_size, 1, big);
  c.num_hidden_layers = integer("num_hidden_layers", c.num_hidden_layers, 0, 1024);
  c.num_attention_heads = integer("num_attention_heads", c.num_attention_heads, 1, big);
  c.intermediate_size = integer("intermediate_size", c.intermediate_size, 1, big);
  c.max_position_embeddings = integer("max_position_embeddings", c.max_position_embeddings, 1, big);
  c.type_vocab_size = integer("type_vocab_size", c.type_vocab_size, 1, big);
  if (c.hidden_size % c.num_attention_heads != 0)
    fail(ErrorCode::format, "num_attention_heads",
         std::to_string(c.num_attention_heads) + " does not divide hidden_size " +
             std::to_string(c.hidden_size));
  c.hidden_act_name = string("hidden_act", "gelu");
  if (c.hidden_act_name == "gelu") c.hidden_act = Activation::gelu;
  else if (c.hidden_act_name == "gelu_new" || c.hidden_act_name == "gelu_pytorch_tanh")
    c.hidden_act = Activation::gelu_tanh;
  else if (c.hidden_act_name == "relu") c.hidden_act = Activation::relu;
  else
    fail(ErrorCode::unsupported, "hidden_act",
         quote_json(c.hidden_act_name) +
             " is not supported: gelu, gelu_new, gelu_pytorch_tanh and relu are");
  if (j.contains("layer_norm_eps")) {
    const json& v = j["layer_norm_eps"];
    if (!v.is_number() || !(v.get<double>() > 0.0) || !(v.get<double>() < 1.0))
      fail(ErrorCode::format, "layer_norm_eps", "expected a number in (0, 1), got " + short_dump(v));
    c.layer_norm_eps = static_cast<float>(v.get<double>());
  }
  return c;
}

BertConfig BertConfig::load(const std::filesystem::path& path) {
  // A regular file of bounded size, read (not mapped): a FIFO is refused instead of waited on, a
  // link to /dev/zero or a directory is named as such, a file over 16 MiB is refused by its size.
  io::FileBytes file = io::FileBytes::open(path, /*try_map=*/false, kMaxConfigBytes);
  const auto bytes = file.bytes();
  return parse(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
}

}  // namespace vkformer::models::bert
