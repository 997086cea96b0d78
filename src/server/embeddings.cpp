// POST /v1/embeddings: texts through the SentenceEmbedder, as floats or base64 float32.
#include <cstring>

#include "api_error.hpp"
#include "requests.hpp"
#include "server_impl.hpp"
#include "vkformer/error.hpp"

namespace vkformer {

using nlohmann::json;
using server::ApiError;

namespace {

// RFC 4648 base64 of little-endian float32 values, what OpenAI's encoding_format "base64" sends.
std::string base64_floats(const float* v, size_t n) {
  static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(n * 4, '\0');
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((u >> (8 * b)) & 0xFF);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

}  // namespace

void ServerImpl::handle_embeddings(const httplib::Request& req, httplib::Response& res) {
  check_ready();
  if (options_.embedding_model.empty()) throw ApiError(404, "invalid_request_error", "this server has no embedding model (start it with --embedding-model)", "model", "model_not_found");
  const json body = server::parse_body(req.body, options_.max_json_depth);
  server::EmbeddingRequest r = server::parse_embedding_request(body, static_cast<size_t>(options_.max_embedding_inputs));
  if (r.model != embedding_id_) throw ApiError(404, "invalid_request_error", "the model '" + r.model.substr(0, 100) + "' does not exist: this server embeds with '" + embedding_id_ + "'", "model", "model_not_found");
  std::unique_lock lock(embedder_mutex_);
  if (!embedder_ || embedder_->device().lost()) {  // lost since (by the language model, or here)
    try {
      restore_embedder();
    } catch (const std::exception& e) {
      throw ApiError(503, "server_error",
                     std::string("the device failed and the embedding model could not be loaded again: ") + e.what() +
                         ": retry when GET /health answers 200",
                     "", "device_lost");
    }
  }
  int64_t tokens = 0;
  for (const std::string& t : r.inputs)
    tokens += static_cast<int64_t>(embedder_->tokenizer().encode(t, static_cast<size_t>(embedder_->max_seq_length())).size());
  HostTensor e;
  try {
    e = embedder_->embed(r.inputs);
  } catch (const Error& failure) {
    if (failure.code() == ErrorCode::out_of_memory)
      throw ApiError(503, "server_error", std::string("embedding failed, out of device memory: ") + failure.what(), "",
                     "out_of_memory");
    if (failure.code() != ErrorCode::device_lost) throw;
    // The models are loaded again on a new device (the language model by its scheduler, told
    // here); this request is answered at once.
    metrics_.device_lost();
    embedder_ready_ = false;
    embedder_.reset();
    if (scheduler_) {
      scheduler_->device_check();
    } else {
      try {
        restore_embedder();  // no scheduler to do it: /health says "ok" again without another request
      } catch (const std::exception&) {
      }
    }
    throw ApiError(503, "server_error",
                   std::string("embedding failed: ") + failure.what() +
                       "; the server is loading the models again: retry when GET /health answers 200",
                   "", "device_lost");
  }
  const size_t dim = static_cast<size_t>(embedder_->dimension());
  lock.unlock();
  const std::vector<float> values = e.to_f32();
  json data = json::array();
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const float* row = values.data() + i * dim;
    json embedding = r.base64 ? json(base64_floats(row, dim)) : json(std::vector<float>(row, row + dim));
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
  }
  metrics_.prompt_tokens(tokens);
  json out = {{"object", "list"}, {"data", std::move(data)}, {"model", embedding_id_},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
  res.set_content(out.dump(), "application/json");
}

}  // namespace vkformer
