// Server: HTTP set up with its limits, authentication and OpenAI-shaped errors; the models loaded
// once it listens; the graceful shutdown.
#include <chrono>
#include <ctime>
#include <thread>

#ifndef _WIN32
#include <sys/socket.h>
#endif

#include "api_error.hpp"
#include "connection_pool.hpp"
#include "server_impl.hpp"
#include "vkformer/error.hpp"
#include "vkformer/llm.hpp"

namespace vkformer {

using nlohmann::json;
using server::ApiError;

namespace {

void check_options(const ServerOptions& o) {
  auto positive = [](const char* option, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      throw Error(ErrorCode::invalid_argument, std::string("Server: ") + option + " is " + std::to_string(v) +
                                                   ", expected " + std::to_string(lo) + ".." + std::to_string(hi));
  };
  if (o.model.empty() && o.embedding_model.empty())
    throw Error(ErrorCode::invalid_argument, "Server: give a model (--model) or an embedding model (--embedding-model)");
  positive("--port", o.port, 0, 65535);
  positive("--parallel", o.parallel, 1, 256);
  positive("--max-connections", o.max_connections, 1, 4096);
  positive("--max-queue", o.max_queue, 0, 1 << 20);
  positive("--read-timeout", o.read_timeout_s, 1, 3600);
  positive("--write-timeout", o.write_timeout_s, 1, 3600);
  positive("--max-json-depth", o.max_json_depth, 2, 1000);
  positive("--max-embedding-inputs", o.max_embedding_inputs, 1, 1 << 16);
  positive("--max-body-bytes", static_cast<int64_t>(std::min<size_t>(o.max_body_bytes, INT64_MAX)), 1024, 1LL << 32);
  positive("--shutdown-grace", o.shutdown_grace_s, 0, 3600);
  positive("--batch-window", o.batch_window_ms, 0, 10000);
  positive("--keep", o.keep, -1, 1 << 20);  // against the context once the model is loaded
  positive("--n-discard", o.n_discard, 0, 1 << 20);  // likewise
  if (o.batch_tokens != 0 && (o.batch_tokens < o.parallel || o.batch_tokens > 4096))
    throw Error(ErrorCode::invalid_argument,
                "Server: --batch-tokens is " + std::to_string(o.batch_tokens) + ", expected 0 (automatic) or " +
                    std::to_string(o.parallel) + " (--parallel: a row for each generating sequence) to 4096");
  if (o.host.empty()) throw Error(ErrorCode::invalid_argument, "Server: --host is empty");
  if ((o.speculative.mode == SpeculativeMode::draft) != !o.model_draft.empty())
    throw Error(ErrorCode::invalid_argument, "Server: --model-draft goes with speculative mode draft, and mode draft "
                                             "needs --model-draft");
  if (o.speculative.mode != SpeculativeMode::off) {
    SpeculativeOptions checked = o.speculative;  // the ranges (the draft is a file here, not a model)
    checked.mode = SpeculativeMode::ngram;
    try {
      validate(checked);
    } catch (const Error& e) {
      throw Error(ErrorCode::invalid_argument, std::string("Server: ") + e.what());
    }
  }
}

// The same time whatever the key given: no early exit at the first differing byte.
bool same_key(std::string_view given, std::string_view key) {
  unsigned diff = given.size() != key.size() ? 1u : 0u;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(key[i]) ^ static_cast<unsigned char>(i < given.size() ? given[i] : 0);
  return diff == 0;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.to_json().dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

std::string endpoint_label(const std::string& path) {
  for (const char* known : {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models", "/health", "/metrics"})
    if (path == known) return known;
  return "other";
}

}  // namespace

ServerImpl::ServerImpl(Device device, const ServerOptions& options) : device_(std::move(device)), options_(options) {
  check_options(options_);
  routes();
}

void ServerImpl::load_models() {
  if (!options_.model.empty()) {
    // A CPU device (lavapipe) pays for every row of a step about what a prompt token costs
    // (SmolLM2: ~4.7 ms a row past 32 rows, a 128-row step 3.4x a 32-row one), so the budget
    // bounds how long decoding sequences wait for a step that reads prompts: 128 rows, in which
    // the short prompts of a burst of 8 that the window gathered mostly go in the first step
    // (bench/RESULTS.md, "Burst TTFT"); on a GPU, rows up to a few hundred cost about one.
    batch_tokens_ = std::max<int64_t>(options_.batch_tokens > 0 ? options_.batch_tokens
                                      : device_.info().type == "cpu" ? 128 : 512,
                                      options_.parallel);
    std::unique_ptr<server::SequenceSlots> slots = load_slots();
    // The template comes with the model. A file whose template vkformer does not render (or has
    // none) still serves /v1/completions; chat requests get the reason, never a prompt in some
    // other model's format. A bad --chat-template name fails here.
    const ModelChatTemplates& templates = slots->model().chat_templates();
    if (!options_.chat_template.empty() || templates.has_file_template())
      chat_template_ = templates.choose(options_.chat_template);
    else
      chat_template_problem_ = templates.problem();
    context_ = slots->context();
    kv_cache_ = slots->model().kv_cache();
    tokenizer_ = std::make_shared<const GgufTokenizer>(slots->model().tokenizer());
    max_prompt_tokens_ = options_.max_prompt_tokens > 0 ? std::min(options_.max_prompt_tokens, context_ - 1) : context_ - 1;
    // With a context shift a sequence may run past its context: --max-tokens is not capped by it.
    max_tokens_ = options_.max_tokens > 0
                      ? (options_.context_shift ? options_.max_tokens : std::min(options_.max_tokens, context_))
                      : context_;
    keep_limit_ = std::max<int64_t>(0, context_ - 4 - (tokenizer_->add_bos() ? 1 : 0));
    if (options_.keep > keep_limit_)
      throw Error(ErrorCode::invalid_argument,
                  "Server: --keep is " + std::to_string(options_.keep) + ", more than the " +
                      std::to_string(keep_limit_) + " tokens a context shift can keep in a context of " +
                      std::to_string(context_) + " (--ctx - 4" + (tokenizer_->add_bos() ? ", after the BOS token)" : ")"));
    if (options_.n_discard >= context_)
      throw Error(ErrorCode::invalid_argument, "Server: --n-discard is " + std::to_string(options_.n_discard) +
                                                   ", not less than the context of " + std::to_string(context_) +
                                                   " tokens per sequence (--ctx)");
    model_id_ = options_.model_name.empty() ? options_.model.stem().string() : options_.model_name;
    server::SchedulerOptions scheduling;
    scheduling.max_queue = static_cast<size_t>(options_.max_queue);
    scheduling.context_shift = options_.context_shift;
    scheduling.speculative = options_.speculative;
    scheduling.gather = std::chrono::milliseconds(options_.batch_window_ms);
    scheduler_ = std::make_unique<server::Scheduler>(std::move(slots), [this] { return load_slots(); }, scheduling,
                                                     metrics_, request_metrics_);
  }
  if (!options_.embedding_model.empty()) {
    embedder_ = std::make_unique<SentenceEmbedder>(SentenceEmbedder::load(device_, options_.embedding_model));
    std::filesystem::path dir = options_.embedding_model;
    if (!dir.has_filename()) dir = dir.parent_path();
    embedding_id_ = dir.filename().string();
  }
}

Device ServerImpl::usable_device() {
  std::lock_guard lock(device_mutex_);
  if (device_.lost()) {
    if (!options_.open_device)
      throw Error(ErrorCode::device_lost, "the device was lost and this server cannot open another "
                                          "(ServerOptions::open_device is not set): restart it");
    device_ = options_.open_device();
  }
  return device_;
}

std::unique_ptr<server::SequenceSlots> ServerImpl::load_slots() {
  auto slots = std::make_unique<server::SequenceSlots>(usable_device(), options_.model, options_.parallel,
                                                       options_.context, batch_tokens_, options_.cache_type_k,
                                                       options_.cache_type_v, options_.kv_rotation,
                                                       options_.context_shift,
                                                       options_.speculative.mode == SpeculativeMode::off
                                                           ? 0
                                                           : options_.speculative.draft_max,
                                                       options_.model_draft);
  // The embedding model shares the device: loaded again now, so that /health says "ok" again
  // without waiting for an embedding request.
  if (!options_.embedding_model.empty() && ready_.load(std::memory_order_acquire)) {
    std::lock_guard lock(embedder_mutex_);
    if (!embedder_ || embedder_->device().lost()) {
      try {
        restore_embedder();
      } catch (const std::exception&) {  // the next embedding request tries again and answers why
      }
    }
  }
  return slots;
}

void ServerImpl::restore_embedder() {
  embedder_ready_ = false;
  embedder_.reset();  // what it held on the lost device, freed first
  embedder_ = std::make_unique<SentenceEmbedder>(SentenceEmbedder::load(usable_device(), options_.embedding_model));
  embedder_ready_ = true;
}

void ServerImpl::check_ready() const {
  if (!ready_.load(std::memory_order_acquire))
    throw ApiError(503, "server_error", "the model is loading: try again when GET /health answers 200", "",
                   "model_loading");
}

ServerImpl::~ServerImpl() { stop(); }

void ServerImpl::routes() {
  const ServerOptions& o = options_;
  http_.new_task_queue = [this, n = o.max_connections] {
    return new server::ConnectionPool(static_cast<size_t>(n), metrics_);
  };
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of clients on a busy machine overflowed
  // it and some of their connections were reset (the kernel's "SYN flooding" fallback). The socket
  // is noted here and listened on again with the system's largest backlog once bound (start()).
  http_.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_socket_ = static_cast<int64_t>(sock);
  });
  http_.set_payload_max_length(o.max_body_bytes);
  http_.set_read_timeout(o.read_timeout_s, 0);
  http_.set_write_timeout(o.write_timeout_s, 0);
  http_.set_keep_alive_timeout(5);

  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (server::over_connection_limit()) {
      res.set_header("Connection", "close");
      send_error(res, ApiError(503, "server_error",
                               "too many connections: the server serves " + std::to_string(options_.max_connections) +
                                   " at once (limit --max-connections)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (draining_ && req.path != "/health" && req.path != "/metrics") {
      res.set_header("Connection", "close");
      send_error(res, ApiError(503, "server_error", "the server is shutting down", "", "server_shutting_down"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!options_.api_key.empty() && req.path != "/health") {
      const std::string auth = req.get_header_value("Authorization");
      const std::string prefix = "Bearer ";
      const bool bearer = auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0;
      if (!same_key(bearer ? std::string_view(auth).substr(prefix.size()) : std::string_view(), options_.api_key)) {
        res.set_header("WWW-Authenticate", "Bearer");
        send_error(res, ApiError(401, "authentication_error",
                                 bearer ? "incorrect API key" : "missing API key: send 'Authorization: Bearer KEY'",
                                 "", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors httplib answers by itself (413, 404, 400 for a bad request line, ...) get a JSON body
  // naming the limit where one applies.
  http_.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "HTTP " + std::to_string(res.status);
    if (res.status == 413)
      message = "the request body is larger than the limit of " + std::to_string(options_.max_body_bytes) +
                " bytes (--max-body-bytes)";
    else if (res.status == 404)
      message = "no such endpoint: " + req.method + " " + req.path.substr(0, 200);
    else if (res.status == 400)
      message = "malformed HTTP request";
    else if (res.status == 414)
      message = "the request line is too long";
    send_error(res, ApiError(res.status, res.status >= 500 ? "server_error" : "invalid_request_error", message));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {  // the library refusing a request's value is the request's fault
      const bool client = e.code() == ErrorCode::invalid_argument;
      send_error(res, ApiError(client ? 400 : 500, client ? "invalid_request_error" : "server_error", e.what()));
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, "server_error", std::string("internal error: ") + e.what()));
    } catch (...) {
      send_error(res, ApiError(500, "server_error", "internal error"));
    }
  });
  http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.request(endpoint_label(req.path), res.status);
  });

  http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    // 503 while the models load, while they load again after a device loss ("degraded", with the
    // reason) and once shutting down: a readiness probe keeps traffic away.
    const bool ready = ready_.load(std::memory_order_acquire);
    json out = {{"status", draining_ ? "shutting_down" : ready ? "ok" : "loading"}};
    if (ready && !draining_) {
      std::string reason;
      if (scheduler_ && !scheduler_->ready()) reason = scheduler_->failure();
      else if (!options_.embedding_model.empty() && !embedder_ready_)
        reason = "the embedding model is being loaded again after the device failed";
      if (!reason.empty()) out = {{"status", "degraded"}, {"reason", reason}};
    }
    if (out["status"] != "ok") {
      res.status = 503;
      if (out["status"] != "shutting_down") res.set_header("Retry-After", "1");
    }
    res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(options_.parallel) + request_metrics_.render(), "text/plain; version=0.0.4");
  });
  http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    check_ready();
    json data = json::array();
    const auto created = static_cast<int64_t>(std::time(nullptr));
    for (const std::string& id : {model_id_, embedding_id_})
      if (!id.empty()) data.push_back({{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "vkformer"}});
    res.set_content(json{{"object", "list"}, {"data", data}}.dump(), "application/json");
  });
  auto post_only = [this](const char* path) {
    http_.Get(path, [](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", "POST");
      send_error(res, ApiError(405, "invalid_request_error", req.path + " takes POST, not GET"));
    });
  };
  http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, true);
  });
  http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, false);
  });
  http_.Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) {
    handle_embeddings(req, res);
  });
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/v1/embeddings"}) post_only(path);
}

void ServerImpl::start() {
  if (listener_.joinable()) throw Error(ErrorCode::invalid_argument, "Server::start: already started");
  if (options_.port == 0) {
    port_ = http_.bind_to_any_port(options_.host);
    if (port_ <= 0) throw Error(ErrorCode::io, "Server: cannot listen on " + options_.host + " (any port)");
  } else {
    if (!http_.bind_to_port(options_.host, options_.port))
      throw Error(ErrorCode::io, "Server: cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                                     " (in use, or not an address of this machine?)");
    port_ = options_.port;
  }
#ifndef _WIN32
  if (listen_socket_ >= 0) ::listen(static_cast<int>(listen_socket_), SOMAXCONN);  // a second listen() sets the backlog
#endif
  listener_ = std::thread([this] { http_.listen_after_bind(); });
  // httplib's stop() does nothing before the listening loop has started: a model that fails to
  // load at once must find it running.
  for (int ms = 0; ms < 10000 && !http_.is_running(); ++ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (options_.on_listening) options_.on_listening(port_);
  try {
    load_models();
  } catch (...) {
    stop();
    throw;
  }
  ready_.store(true, std::memory_order_release);
}

void ServerImpl::wait() {
  std::unique_lock lock(stop_mutex_);
  stopped_cv_.wait(lock, [&] { return stopped_; });
}

void ServerImpl::stop() {
  {
    std::lock_guard lock(stop_mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (scheduler_) scheduler_->stop();  // ends the streams in progress
  if (!http_stopped_.exchange(true)) http_.stop();
  if (listener_.joinable()) listener_.join();  // the handlers' threads are done
  stopped_cv_.notify_all();
}

void ServerImpl::shutdown() {
  {
    std::lock_guard lock(stop_mutex_);
    if (stopped_) return;
  }
  // New requests get 503 (and /health 503 "shutting_down", for the load balancer) while the
  // server still listens: httplib's stop() would also cut the streams in progress short.
  draining_ = true;
  using Clock = std::chrono::steady_clock;
  if (scheduler_ && ready_.load(std::memory_order_acquire))
    scheduler_->drain(Clock::now() + std::chrono::seconds(options_.shutdown_grace_s));
  // Every job is done; the handlers write their last events (a client not reading is dropped
  // after --write-timeout).
  const auto written = Clock::now() + std::chrono::seconds(options_.write_timeout_s + 1);
  while (completions_in_flight_ > 0 && Clock::now() < written) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop();
}

Server::Server(Device device, const ServerOptions& options)
    : impl_(std::make_unique<ServerImpl>(std::move(device), options)) {}
Server::~Server() = default;
void Server::start() { impl_->start(); }
int Server::port() const { return impl_->port(); }
KvCacheInfo Server::kv_cache() const { return impl_->kv_cache(); }
void Server::wait() { impl_->wait(); }
void Server::stop() { impl_->stop(); }
void Server::shutdown() { impl_->shutdown(); }

}  // namespace vkformer
