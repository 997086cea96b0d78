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
  KvCacheInfo kv_cache() const { return slots_ ? slots_->model().kv_cache() : KvCacheInfo{}; }

 private:
  friend struct Handlers;
  void routes();
  void load_models();
  void check_ready() const;  // ApiError 503 model_loading until the models are loaded
  // The --verbose line of an answered completion, and its stages into /metrics.
  void finished(const std::string& id, const server::GenerationJob& job, int64_t prompt_tokens);
  void handle_completion(const httplib::Request& req, httplib::Response& res, bool chat);
  void handle_embeddings(const httplib::Request& req, httplib::Response& res);
  std::string next_id(const char* prefix) { return prefix + std::to_string(++ids_); }

  Device device_;
  ServerOptions options_;
  server::Metrics metrics_;
  server::RequestMetrics request_metrics_;
  std::atomic<bool> ready_{false};
  std::unique_ptr<server::SequenceSlots> slots_;
  std::unique_ptr<server::Scheduler> scheduler_;
  std::optional<ChatTemplate> chat_template_;
  std::string chat_template_problem_;  // why there is no template (chat requests answer it)
  std::unique_ptr<SentenceEmbedder> embedder_;
  std::mutex embedder_mutex_;  // one embedding request at a time: SentenceEmbedder is single-threaded
  std::string model_id_, embedding_id_;
  int64_t max_prompt_tokens_ = 0, max_tokens_ = 0;
  httplib::Server http_;
  std::thread listener_;
  int port_ = 0;
  std::atomic<uint64_t> ids_{0};
  std::atomic<bool> http_stopped_{false};  // httplib's stop() closes the socket once
  std::atomic<bool> draining_{false};      // shutdown(): new requests get 503
  std::atomic<int> completions_in_flight_{0};  // completion responses not yet fully written
  std::mutex stop_mutex_;
  std::condition_variable stopped_cv_;
  bool stopped_ = false;
};

}  // namespace vkformer
