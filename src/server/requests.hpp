#pragma once
// The OpenAI request bodies this server accepts, parsed and checked field by field. Anything it
// cannot honour exactly (n > 1, logprobs, tools, a non-zero frequency penalty, ...) is a 400 that
// names the field, rather than an answer that silently differs from what was asked.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "vkformer/chat.hpp"
#include "vkformer/sampling.hpp"

namespace vkformer::server {

// Parses a request body: 400 for malformed JSON or invalid UTF-8 (with the parser's position),
// for nesting deeper than max_depth, and for a body that is not a JSON object.
nlohmann::json parse_body(std::string_view body, int max_depth);

// What both completion endpoints share.
struct GenerationParams {
  std::string model;
  bool stream = false;
  bool include_usage = false;                 // stream_options.include_usage
  std::optional<int64_t> max_tokens;          // absent: as many as the context allows
  SamplingOptions sampling;                   // temperature defaults to 1, as OpenAI's
  std::vector<std::string> stop;              // up to 4 non-empty strings
  bool cache_prompt = true;                   // llama-server's extension: reuse a slot's cached prefix
  std::optional<int64_t> n_keep;              // llama-server's: tokens a context shift keeps; -1: the prompt
  std::optional<int64_t> n_discard;           // llama-server's: tokens a shift forgets after n_keep; 0: half
};

struct ChatRequest {
  GenerationParams params;
  std::vector<ChatMessage> messages;
};

struct CompletionRequest {
  GenerationParams params;
  std::string prompt;                         // a string prompt, or
  std::vector<int32_t> prompt_tokens;         // token ids (checked against the vocabulary later)
};

struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> inputs;
  bool base64 = false;  // encoding_format "base64": little-endian float32, base64-encoded
};

ChatRequest parse_chat_request(const nlohmann::json& body);
CompletionRequest parse_completion_request(const nlohmann::json& body);
EmbeddingRequest parse_embedding_request(const nlohmann::json& body, size_t max_inputs);

}  // namespace vkformer::server
