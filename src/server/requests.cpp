// Parsing and checking OpenAI request bodies (requests.hpp).
#include "requests.hpp"

#include <cmath>
#include <limits>
#include <random>

#include "api_error.hpp"

namespace vkformer::server {

using nlohmann::json;

namespace {

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

[[noreturn]] void wrong_type(const std::string& field, const char* expected, const json& got) {
  throw bad_request(field, "'" + field + "' must be " + expected + ", got " + type_name(got));
}

const json* find(const json& body, const char* field) {
  auto it = body.find(field);
  return it == body.end() ? nullptr : &*it;
}

std::optional<bool> get_bool(const json& body, const char* field) {
  const json* v = find(body, field);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_boolean()) wrong_type(field, "a boolean", *v);
  return v->get<bool>();
}

// An integer in [lo, hi]; floats (even 5.0) and numbers beyond int64 are refused.
std::optional<int64_t> get_int(const json& body, const char* field, int64_t lo, int64_t hi) {
  const json* v = find(body, field);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number_integer()) wrong_type(field, "an integer", *v);
  const bool too_big = v->is_number_unsigned() &&
                       v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  const int64_t x = too_big ? std::numeric_limits<int64_t>::max() : v->get<int64_t>();
  if (too_big || x < lo || x > hi)
    throw bad_request(field, "'" + std::string(field) + "' must be from " + std::to_string(lo) + " to " +
                                 std::to_string(hi) + ", got " + v->dump());
  return x;
}

// A finite number in [lo, hi] (lo_open: lo itself excluded).
std::optional<double> get_number(const json& body, const char* field, double lo, double hi,
                                 bool lo_open = false) {
  const json* v = find(body, field);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) wrong_type(field, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) {
    std::string range = (lo_open ? "(" : "[") + json(lo).dump() + ", " + json(hi).dump() + "]";
    throw bad_request(field, "'" + std::string(field) + "' must be in " + range + ", got " + v->dump());
  }
  return x;
}

std::optional<std::string> get_string(const json& body, const char* field) {
  const json* v = find(body, field);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_string()) wrong_type(field, "a string", *v);
  return v->get<std::string>();
}

// Fields whose only supported value is their default: anything else is refused by name.
void require_default(const json& body, const char* field, const json& allowed, const char* why) {
  const json* v = find(body, field);
  if (!v || v->is_null() || *v == allowed) return;
  throw bad_request(field, "'" + std::string(field) + "' = " + v->dump().substr(0, 64) +
                               " is not supported: " + why);
}

void refuse_present(const json& body, const char* field, const char* why) {
  const json* v = find(body, field);
  if (!v || v->is_null()) return;
  if (v->is_array() && v->empty()) return;
  throw bad_request(field, "'" + std::string(field) + "' is not supported: " + why);
}

GenerationParams parse_params(const json& body) {
  GenerationParams p;
  auto model = get_string(body, "model");
  if (!model) throw bad_request("model", "'model' is required (GET /v1/models lists it)");
  p.model = *model;
  p.stream = get_bool(body, "stream").value_or(false);
  p.cache_prompt = get_bool(body, "cache_prompt").value_or(true);
  if (const json* so = find(body, "stream_options"); so && !so->is_null()) {
    if (!so->is_object()) wrong_type("stream_options", "an object", *so);
    if (!p.stream) throw bad_request("stream_options", "'stream_options' is only allowed with stream: true");
    auto usage = so->find("include_usage");
    if (usage != so->end() && !usage->is_null()) {
      if (!usage->is_boolean()) wrong_type("stream_options.include_usage", "a boolean", *usage);
      p.include_usage = usage->get<bool>();
    }
  }
  const int64_t int_max = std::numeric_limits<int32_t>::max();
  auto max_tokens = get_int(body, "max_tokens", 1, int_max);
  auto max_completion = get_int(body, "max_completion_tokens", 1, int_max);
  if (max_tokens && max_completion && *max_tokens != *max_completion)
    throw bad_request("max_completion_tokens", "'max_tokens' and 'max_completion_tokens' differ");
  p.max_tokens = max_completion ? max_completion : max_tokens;
  p.n_keep = get_int(body, "n_keep", -1, int_max);  // against the context in the handler
  p.n_discard = get_int(body, "n_discard", 0, int_max);  // likewise

  SamplingOptions& s = p.sampling;
  s.temperature = static_cast<float>(get_number(body, "temperature", 0.0, 2.0).value_or(1.0));
  s.top_p = static_cast<float>(get_number(body, "top_p", 0.0, 1.0, true).value_or(1.0));
  s.top_k = static_cast<int32_t>(get_int(body, "top_k", 0, int_max).value_or(0));
  s.min_p = static_cast<float>(get_number(body, "min_p", 0.0, 1.0).value_or(0.0));
  s.repeat_penalty = static_cast<float>(get_number(body, "repeat_penalty", 0.0, 10.0, true).value_or(1.0));
  if (auto seed = get_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    s.seed = static_cast<uint64_t>(*seed);
  else
    s.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  for (const char* penalty : {"frequency_penalty", "presence_penalty"}) {
    auto v = get_number(body, penalty, -2.0, 2.0);
    if (v && *v != 0.0)
      throw bad_request(penalty, "'" + std::string(penalty) + "' other than 0 is not supported (use repeat_penalty)");
  }

  if (const json* stop = find(body, "stop"); stop && !stop->is_null()) {
    std::vector<json> items;
    if (stop->is_string()) items.push_back(*stop);
    else if (stop->is_array()) items.assign(stop->begin(), stop->end());
    else wrong_type("stop", "a string or an array of strings", *stop);
    if (items.size() > 4) throw bad_request("stop", "'stop' has " + std::to_string(items.size()) + " strings, at most 4");
    for (const json& item : items) {
      if (!item.is_string()) wrong_type("stop", "a string or an array of strings", item);
      std::string text = item.get<std::string>();
      if (text.empty()) throw bad_request("stop", "'stop' strings must not be empty");
      if (text.size() > 256) throw bad_request("stop", "'stop' strings are at most 256 bytes");
      p.stop.push_back(std::move(text));
    }
  }
  require_default(body, "n", 1, "this server returns one choice (n = 1)");
  require_default(body, "best_of", 1, "this server returns one choice (best_of = 1)");
  require_default(body, "logprobs", false, "log-probabilities are not returned");
  refuse_present(body, "top_logprobs", "log-probabilities are not returned");
  refuse_present(body, "logit_bias", "logit bias is not implemented");
  refuse_present(body, "tools", "tool calls are not implemented");
  refuse_present(body, "functions", "function calls are not implemented");
  if (const json* rf = find(body, "response_format"); rf && !rf->is_null()) {
    if (!rf->is_object() || rf->value("type", json()) != "text")
      throw bad_request("response_format", "'response_format' other than {\"type\": \"text\"} is not supported");
  }
  if (const json* user = find(body, "user"); user && !user->is_null() && !user->is_string())
    wrong_type("user", "a string", *user);
  return p;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts joined.
std::string message_content(const json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return {};
  if (!content.is_array()) wrong_type(field, "a string or an array of text parts", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string where = field + "[" + std::to_string(i) + "]";
    if (!part.is_object()) wrong_type(where, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || *type != "text")
      throw bad_request(where, "'" + where + ".type' must be \"text\" (only text content is supported)");
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) throw bad_request(where + ".text", "'" + where + ".text' must be a string");
    text += t->get<std::string>();
  }
  return text;
}

}  // namespace

nlohmann::json parse_body(std::string_view body, int max_depth) {
  json parsed;
  try {
    // The callback sees each value's depth before it is built: deep nesting stops there.
    parsed = json::parse(body, [max_depth](int depth, json::parse_event_t, json&) {
      if (depth > max_depth)
        throw bad_request("", "the request's JSON is nested deeper than " + std::to_string(max_depth) +
                                  " levels (the server's limit)");
      return true;
    });
  } catch (const json::parse_error& e) {
    throw bad_request("", std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!parsed.is_object()) throw bad_request("", "the request body must be a JSON object, got " + type_name(parsed));
  return parsed;
}

ChatRequest parse_chat_request(const json& body) {
  ChatRequest r;
  r.params = parse_params(body);
  const json* messages = find(body, "messages");
  if (!messages) throw bad_request("messages", "'messages' is required");
  if (!messages->is_array()) wrong_type("messages", "an array", *messages);
  if (messages->empty()) throw bad_request("messages", "'messages' must not be empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) wrong_type(where, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw bad_request(where + ".role", "'" + where + ".role' must be a string");
    const std::string name = role->get<std::string>();
    if (name != "system" && name != "user" && name != "assistant" && name != "developer")
      throw bad_request(where + ".role", "'" + where + ".role' must be system, developer, user or assistant, got \"" +
                                            name.substr(0, 32) + "\"");
    auto content = m.find("content");
    if (content == m.end()) throw bad_request(where + ".content", "'" + where + ".content' is required");
    if (m.contains("tool_calls")) throw bad_request(where + ".tool_calls", "tool calls are not implemented");
    r.messages.push_back({name == "developer" ? "system" : name, message_content(*content, where + ".content")});
  }
  return r;
}

CompletionRequest parse_completion_request(const json& body) {
  CompletionRequest r;
  r.params = parse_params(body);
  require_default(body, "echo", false, "the prompt is not echoed");
  refuse_present(body, "suffix", "insertion (suffix) is not implemented");
  const json* prompt = find(body, "prompt");
  if (!prompt) throw bad_request("prompt", "'prompt' is required");
  const json* p = prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
    if (r.prompt.empty()) throw bad_request("prompt", "'prompt' must not be empty");
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    for (const json& id : *p) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
        throw bad_request("prompt", "'prompt' token ids must be integers from 0 to 2^31 - 1, got " + id.dump().substr(0, 32));
      r.prompt_tokens.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  } else if (p->is_array() && p->size() > 1) {
    throw bad_request("prompt", "'prompt' with " + std::to_string(p->size()) + " prompts is not supported: send one per request");
  } else {
    wrong_type("prompt", "a string, an array of one string, or an array of token ids", *p);
  }
  return r;
}

EmbeddingRequest parse_embedding_request(const json& body, size_t max_inputs) {
  EmbeddingRequest r;
  auto model = get_string(body, "model");
  if (!model) throw bad_request("model", "'model' is required (GET /v1/models lists it)");
  r.model = *model;
  const json* input = find(body, "input");
  if (!input) throw bad_request("input", "'input' is required");
  if (input->is_string()) {
    r.inputs.push_back(input->get<std::string>());
  } else if (input->is_array()) {
    if (input->empty()) throw bad_request("input", "'input' must not be an empty array");
    if (input->size() > max_inputs)
      throw bad_request("input", "'input' has " + std::to_string(input->size()) + " texts, more than the limit of " +
                                     std::to_string(max_inputs) + " (--max-embedding-inputs)");
    for (const json& t : *input) {
      if (!t.is_string())
        throw bad_request("input", "'input' must be a string or an array of strings (token ids are not supported), got " +
                                       type_name(t) + " in the array");
      r.inputs.push_back(t.get<std::string>());
    }
  } else {
    wrong_type("input", "a string or an array of strings", *input);
  }
  auto format = get_string(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    throw bad_request("encoding_format", "'encoding_format' must be \"float\" or \"base64\", got \"" + format.substr(0, 32) + "\"");
  r.base64 = format == "base64";
  refuse_present(body, "dimensions", "the model's dimension is fixed");
  return r;
}

}  // namespace vkformer::server
