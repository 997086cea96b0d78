#pragma once
// An OpenAI-compatible HTTP server: a GGUF language model behind /v1/chat/completions and
// /v1/completions (server-sent events or one JSON answer), a sentence-embedding model behind
// /v1/embeddings, and /v1/models, /health, /metrics (Prometheus text). `vkformer serve` is this
// class; an app can run it in-process the same way:
//
//   vkformer::ServerOptions o;
//   o.model = "SmolLM2-135M-Instruct.Q4_1.gguf";
//   o.port = 0;                        // any free port
//   vkformer::Server server(device, o);  // checks the options
//   server.start();                      // listening on o.host:server.port(), the models loaded
//   ...
//   server.shutdown();                   // in-flight requests finish (within shutdown_grace_s)
//
// start() listens before it loads the models, so that /health can answer 503 "loading" (a
// readiness probe) until they are ready. Up to `parallel` requests generate at once; each
// scheduler step carries every generating sequence's next token and up to `batch_tokens` tokens
// in all, the rest taken from waiting prompts; more requests wait in a queue of `max_queue`. A
// slot keeps its sequence's KV cache when it is done, and a request that shares a prefix with it
// computes only the rest (prefix caching). A device lost under it (or out of device memory) ends
// the requests it hit with 503 and a message; after a loss the models are loaded again on a
// device from `open_device`. docs/serve.md has the details.
// Built only where cpp-httplib is found (library vkformer_server, target vkformer::server).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "vkformer/device.hpp"
#include "vkformer/dtype.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/llm.hpp"

namespace vkformer {

struct ServerOptions {
  std::filesystem::path model;            // GGUF language model; empty: no completion endpoints
  std::filesystem::path embedding_model;  // sentence-transformers directory; empty: no embeddings
  std::string host = "127.0.0.1";         // loopback unless told otherwise
  int port = 8080;                        // 0: a free port, port() says which
  int parallel = 4;                       // sequences generating at once (KV slots)
  int64_t context = 0;                    // tokens per slot; 0: the model's, capped at 4096
  // The KV cache's types, K and V apart (llama.cpp's --cache-type-k/v: f32, f16, q8_0, q4_0);
  // unset: the activations' (f32).
  std::optional<DType> cache_type_k, cache_type_v;
  bool kv_rotation = true;                // LanguageModelOptions::kv_rotation
  // llama-server's --context-shift: a sequence that fills its slot's context forgets n_discard
  // (default half) of its tokens after the first n_keep and goes on (BatchedLanguageModel::shift),
  // so prompt + max_tokens may exceed the context (a prompt may not: 400
  // context_length_exceeded). Off: such a request is refused with 400 context_length_exceeded.
  bool context_shift = false;
  // llama-server's --keep: the n_keep of requests that give none; -1: the whole prompt.
  int64_t keep = 0;
  // The n_discard of requests that give none (llama-server's request field): tokens a context
  // shift forgets after n_keep; 0: half of them (llama-server's default). Below the context.
  int64_t n_discard = 0;
  // Speculative decoding per sequence (--spec ngram, --model-draft, --draft-max, --draft-min,
  // --draft-p-min): mode off, ngram (prompt lookup) or draft (model_draft proposes, a GGUF of the
  // target's vocabulary loaded beside it with a slot per sequence); greedy requests give exactly
  // the text of plain decoding. draft_model and adaptive are not used: each proposal (up to
  // draft_max, in the rows a step's prompts leave) is verified.
  SpeculativeOptions speculative;
  std::filesystem::path model_draft;  // mode draft: the draft model
  std::string api_key;                    // non-empty: requests need "Authorization: Bearer KEY"

  // Limits; each refusal names the limit and its option.
  size_t max_body_bytes = 1 << 20;   // request body
  int64_t max_prompt_tokens = 0;     // 0: context - 1
  int64_t max_tokens = 0;            // largest max_tokens accepted; 0: context (with context_shift, may be more)
  int max_connections = 32;          // open connections served; more get 503
  int max_queue = 64;                // requests waiting for a slot; more get 503
  int read_timeout_s = 10;           // a client silent this long mid-request is dropped
  int write_timeout_s = 10;          // a client not reading this long is dropped
  int max_json_depth = 32;           // nesting of the request's JSON
  int max_embedding_inputs = 256;    // texts per /v1/embeddings request
  std::string model_name;            // the id /v1/models lists; empty: the file's stem
  std::string chat_template;         // a prompt format by name (ChatTemplate::names()); empty: the file's
  // Tokens one scheduler step carries (decoding and prompt rows), >= parallel; 0: 128 on a CPU
  // device, where a step costs about its rows (a decoding sequence waits at most a 128-row step
  // for its next token), 512 on a GPU, where rows up to that are nearly free.
  int64_t batch_tokens = 0;
  // With no sequence in a slot, how long the first step waits after the latest request for
  // another of the same burst, so that they share it (at most 4 times this after the first; less
  // once every free slot has one); 0: never.
  int batch_window_ms = 5;
  int shutdown_grace_s = 20;         // shutdown(): how long in-flight requests may take to finish
  bool verbose = false;              // a line on stderr per answered completion: where its time went
  // Called by start() once the port is bound, before the models load (stderr's "loading" line).
  std::function<void(int port)> on_listening;
  // Opens a device anew after the one in use was lost (a driver reset or timeout): the server
  // then loads its models on it and serves again (GET /health answers 503 "degraded" meanwhile).
  // Empty: after a loss the server answers 503 until it is restarted.
  std::function<Device()> open_device;
};

class ServerImpl;

class Server {
 public:
  // Checks the options (invalid_argument naming the option).
  Server(Device device, const ServerOptions& options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port and serves on background threads, then loads the models (the loaders'
  // errors; /health answers 503 "loading" meanwhile); returns once requests are served. A port in
  // use is ErrorCode::io naming host and port.
  void start();
  int port() const;  // the bound port (after start())
  // The language model's KV cache, its types and sizes (after start(); empty without --model).
  KvCacheInfo kv_cache() const;
  // Blocks until stop() is called (from another thread or a signal handler's thread).
  void wait();
  // Stops listening, ends the streams in progress and the scheduler. Safe to call twice.
  void stop();
  // The graceful stop (SIGTERM): answers new requests 503 server_shutting_down (and /health
  // 503), lets those in flight (queued ones included) finish for up to shutdown_grace_s seconds,
  // ends the rest with a final event saying that the server is shutting down (a 503 when not
  // streamed), waits until their responses are written, then stop().
  void shutdown();

 private:
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace vkformer
