#pragma once
// What the Server's parts share: the options, the models, the scheduler and the HTTP server.
// server.cpp sets up HTTP (limits, authentication, errors, /health, /metrics, /v1/models), loads
// the models once listening and shuts down; completions.cpp and embeddings.cpp hold the
// endpoints' handlers. The models and what comes with them are written by start() before
// `ready_` is set and only read after: a handler that finds it unset answers 503 "loading".
#include <httplib.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "metrics.hpp"
#include "request_metrics.hpp"
#include "scheduler.hpp"
#include "sequence_slots.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/embedder.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/server.hpp"

namespace vkformer {

class ServerImpl {
 public:
  ServerImpl(Device device, const ServerOptions& options);
  ~ServerImpl();
  void start();
  void wait();
  void stop();
  void shutdown();
  int port() const { return port_; }
  KvCacheInfo kv_cache() const { return kv_cache_; }

 private:
  friend struct Handlers;
  void routes();
  void load_models();
  // After a device loss (issue 39): the device in use, opened anew (options_.open_device) when it
  // was lost; the language model's slots on it (the scheduler's reload); the embedding model
  // loaded again, under embedder_mutex_.
  Device usable_device();
  std::unique_ptr<server::SequenceSlots> load_slots();
  void restore_embedder();
  void check_ready() const;  // ApiError 503 model_loading until the models are loaded
  // The --verbose line of an answered completion, and its stages into /metrics.
  void finished(const std::string& id, const server::GenerationJob& job, int64_t prompt_tokens);
  void handle_completion(const httplib::Request& req, httplib::Response& res, bool chat);
  void handle_embeddings(const httplib::Request& req, httplib::Response& res);
  std::string next_id(const char* prefix) { return prefix + std::to_string(++ids_); }

  Device device_;            // the device in use, replaced after a loss (usable_device())
  std::mutex device_mutex_;  // device_
  ServerOptions options_;
  server::Metrics metrics_;
  server::RequestMetrics request_metrics_;
  std::atomic<bool> ready_{false};
  std::unique_ptr<server::Scheduler> scheduler_;  // owns the language model's slots
  std::shared_ptr<const GgufTokenizer> tokenizer_;  // the language model's, for the handlers
  int64_t context_ = 0, batch_tokens_ = 0;
  KvCacheInfo kv_cache_;  // the language model's, noted at load (a reload after a loss makes the same)
  std::optional<ChatTemplate> chat_template_;
  std::string chat_template_problem_;  // why there is no template (chat requests answer it)
  std::unique_ptr<SentenceEmbedder> embedder_;  // null while it could not be loaded again after a loss
  std::mutex embedder_mutex_;  // embedder_; one embedding request at a time: SentenceEmbedder is single-threaded
  std::atomic<bool> embedder_ready_{true};  // false from a loss until loaded again (/health degraded)
  std::string model_id_, embedding_id_;
  int64_t max_prompt_tokens_ = 0, max_tokens_ = 0;
  int64_t keep_limit_ = 0;  // the largest n_keep: context - 4 (llama-server's), less the BOS token
  httplib::Server http_;
  std::thread listener_;
  int port_ = 0;
  std::atomic<uint64_t> ids_{0};
  std::atomic<bool> http_stopped_{false};  // httplib's stop() closes the socket once
  int64_t listen_socket_ = -1;             // the listening socket, for its backlog (routes())
  std::atomic<bool> draining_{false};      // shutdown(): new requests get 503
  std::atomic<int> completions_in_flight_{0};  // completion responses not yet fully written
  std::mutex stop_mutex_;
  std::condition_variable stopped_cv_;
  bool stopped_ = false;
};

}  // namespace vkformer
