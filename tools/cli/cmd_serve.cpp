// `vkformer serve --model FILE.gguf`: the OpenAI-compatible HTTP server (vkformer::Server,
// include/vkformer/server.hpp; docs/serve.md). Prints "vkformer serve: loading ... on port PORT"
// once it listens (GET /health answers 503 "loading" until the models are loaded), then
// "vkformer serve: listening on http://HOST:PORT" once it serves requests (with --port 0 the port
// chosen). SIGINT or SIGTERM shuts it down gracefully (in-flight requests finish within
// --shutdown-grace seconds, exit status 0); a second signal ends them at once.
#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <cstdio>
#include <string>
#include <thread>

#include "cli.hpp"
#include "cli_options.hpp"
#include "llm_cli.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/server.hpp"

namespace vkformer::cli {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0, g_stop_signals = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  g_stop_signals = g_stop_signals + 1;
}

int serve_command(const ServerOptions& given, LlmArgs kv, const GlobalOptions& globals) {
  ServerOptions options = given;
  // --spec ngram or --model-draft FILE with --draft-max/--draft-min/--draft-p-min (checked as
  // generate's: exit 2 naming the option; the draft's vocabulary when it is loaded: exit 1).
  check_speculative_args(kv);
  options.speculative = kv.speculative;
  options.model_draft = kv.model_draft;
  options.cache_type_k = cache_type_k(kv);  // unknown names: exit status 2 naming the option
  options.cache_type_v = cache_type_v(kv);
  options.kv_rotation = kv.kv_rotation;
#ifdef SIGPIPE
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error value, not the end of the server
#endif
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  if (!options.chat_template.empty()) {
    try {
      (void)ChatTemplate::named(options.chat_template);  // an unknown name is a command-line mistake
    } catch (const Error& e) {
      usage_error(std::string("--chat-template: ") + e.what());
    }
  }
  // With --ctx given, a --keep no shift could honour is a command-line mistake (with the model's
  // context, the server finds it once loaded; it also counts a BOS token).
  if (options.context > 0 && options.keep > options.context - 4)
    usage_error("--keep " + std::to_string(options.keep) + " is more than --ctx " + std::to_string(options.context) +
                " - 4: a context shift must forget some tokens");
  if (options.context > 0 && options.n_discard >= options.context)
    usage_error("--n-discard " + std::to_string(options.n_discard) + " is not less than --ctx " +
                std::to_string(options.context) + ": a context shift forgets fewer tokens than the context holds");
  if (options.batch_tokens != 0 && options.batch_tokens < options.parallel)
    usage_error("--batch-tokens " + std::to_string(options.batch_tokens) + " is less than --parallel " +
                std::to_string(options.parallel) + ": each step carries a token of every generating sequence");
  // The device in use: replaced when the server opens one anew after a loss, each one's
  // validation messages reported before it is let go.
  Device device = Device::open(globals.device_options());
  std::mutex device_mutex;
  size_t validation_messages = 0;
  ServerOptions o = options;
  o.open_device = [&] {
    std::lock_guard lock(device_mutex);
    validation_messages += report_validation(device);
    std::fprintf(stderr, "vkformer serve: the device was lost: opening it again\n");
    device = Device::open(globals.device_options());
    return device;
  };
  o.on_listening = [&](int port) {
    std::fprintf(stderr, "vkformer serve: loading the model%s on port %d (GET /health answers 503 until it is ready)\n",
                 options.embedding_model.empty() || options.model.empty() ? "" : "s", port);
    std::fflush(stderr);
  };
  Server server(device, o);
  server.start();
  std::fprintf(stderr, "vkformer serve: listening on http://%s:%d (%d parallel sequences)\n", options.host.c_str(),
               server.port(), options.parallel);
  if (!options.model.empty()) {
    const KvCacheInfo kv_cache = server.kv_cache();
    std::fprintf(stderr, "vkformer serve: KV cache K %s, V %s: %llu bytes per token of a sequence; the device's memory "
                         "holds a context of %lld per sequence\n",
                 std::string(dtype_name(kv_cache.type_k)).c_str(), std::string(dtype_name(kv_cache.type_v)).c_str(),
                 static_cast<unsigned long long>(kv_cache.bytes_per_token),
                 static_cast<long long>(kv_cache.context_that_fits));
  }
  std::fflush(stderr);
  while (g_stop_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fprintf(stderr, "vkformer serve: signal %d, shutting down: in-flight requests have %d s to finish (a second signal ends them now)\n",
               static_cast<int>(g_stop_signal), options.shutdown_grace_s);
  std::fflush(stderr);
  std::atomic<bool> done{false};
  std::thread second_signal([&] {  // a second Ctrl-C: no more waiting
    while (!done) {
      if (g_stop_signals > 1) {
        server.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  server.shutdown();
  done = true;
  second_signal.join();
  std::fprintf(stderr, "vkformer serve: stopped\n");
  std::lock_guard lock(device_mutex);
  validation_messages += report_validation(device);
  return validation_messages ? 1 : 0;
}

}  // namespace

Command add_serve_command(CLI::App& app, const GlobalOptions& globals) {
  auto options = std::make_shared<ServerOptions>();
  auto kv = std::make_shared<LlmArgs>();  // --cache-type-k/--cache-type-v
  CLI::App* cmd = app.add_subcommand("serve", "Serve a GGUF language model (and an embedding model) over an "
                                              "OpenAI-compatible HTTP API (docs/serve.md)");
  ServerOptions& o = *options;
  add_gguf_option(*cmd, "--model", o.model, "GGUF language model for /v1/chat/completions and /v1/completions");
  cmd->add_option("--embedding-model", o.embedding_model,
                  "sentence-transformers model directory for /v1/embeddings")->type_name("DIR");
  cmd->add_option("--host", o.host, "address to listen on (default 127.0.0.1: this machine only)")->type_name("H");
  add_whole_number(*cmd, "--port", o.port, 0, 65535, "port to listen on; 0: any free port (default 8080)", "P");
  add_whole_number(*cmd, "--parallel", o.parallel, 1, 256,
                   "sequences generating at once, each with its own KV cache (default 4)");
  add_whole_number(*cmd, "--ctx", o.context, 0, 1 << 20, "tokens per sequence's KV cache; 0: the model's, at most 4096");
  cmd->add_option("--api-key", o.api_key, "require 'Authorization: Bearer KEY' (default: no key)")->type_name("KEY");
  cmd->add_option("--model-name", o.model_name, "the model id clients send (default: the file name without .gguf)");
  cmd->add_option("--chat-template", o.chat_template,
                  "the prompt format by name instead of the model's tokenizer.chat_template: " + ChatTemplate::names())
      ->type_name("NAME");
  cmd->add_option("--max-body-bytes", o.max_body_bytes, "largest request body (default 1 MiB)")
      ->check(unsigned_number_in(1024, uint64_t{1} << 32));
  cmd->add_option("--max-prompt-tokens", o.max_prompt_tokens, "longest prompt; 0: --ctx - 1")
      ->check(whole_number_in(0, 1 << 20));
  cmd->add_option("--max-tokens", o.max_tokens, "largest max_tokens a request may ask; 0: --ctx")
      ->check(whole_number_in(0, 1 << 20));
  cmd->add_option("--max-connections", o.max_connections, "connections served at once; more get 503 (default 32)")
      ->check(whole_number_in(1, 4096));
  cmd->add_option("--max-queue", o.max_queue, "requests waiting for a free sequence; more get 503 (default 64)")
      ->check(whole_number_in(0, 1 << 20));
  cmd->add_option("--read-timeout", o.read_timeout_s, "seconds a client may stay silent mid-request (default 10)")
      ->check(whole_number_in(1, 3600));
  cmd->add_option("--write-timeout", o.write_timeout_s, "seconds a client may not read (default 10)")
      ->check(whole_number_in(1, 3600));
  cmd->add_option("--max-embedding-inputs", o.max_embedding_inputs, "texts per embeddings request (default 256)")
      ->check(whole_number_in(1, 1 << 16));
  add_whole_number(*cmd, "--batch-tokens", o.batch_tokens, 0, 4096,
                   "tokens one scheduler step carries: every generating sequence's next token, then waiting prompts' "
                   "tokens, shortest first; at least --parallel (default 0: 128 on a CPU device, 512 on a GPU)");
  add_whole_number(*cmd, "--batch-window", o.batch_window_ms, 0, 10000,
                   "a request that finds no sequence generating waits until MS milliseconds pass without another "
                   "request (at most 4 x MS), so that a burst's prompts share the first step (less once every free "
                   "sequence has one); 0: none (default 5)", "MS");
  add_whole_number(*cmd, "--shutdown-grace", o.shutdown_grace_s, 0, 3600,
                   "seconds in-flight requests may take to finish after SIGTERM or SIGINT (default 20)", "S");
  cmd->add_flag("--verbose", o.verbose, "a line per answered completion on stderr: where its time went");
  // llama-server's names: --context-shift (off by default) and --keep N (-1: the whole prompt).
  cmd->add_flag("--context-shift,!--no-context-shift", o.context_shift,
                "a sequence that fills its context (--ctx) forgets n_discard (default half) of its tokens after the first n_keep "
                "and goes on (prompt + max_tokens may exceed --ctx; a prompt may not); off by default: such a "
                "request is refused with 400 context_length_exceeded");
  add_whole_number(*cmd, "--keep", o.keep, -1, 1 << 20,
                   "tokens a context shift keeps at the start (after the BOS token), for requests that give no "
                   "n_keep; -1: the whole prompt (default 0)");
  add_whole_number(*cmd, "--n-discard", o.n_discard, 0, 1 << 20,
                   "tokens a context shift forgets after n_keep, for requests that give no n_discard (at most "
                   "all but one of them); 0: half of them, as llama-server (default 0)");
  add_cache_type_options(*cmd, *kv);
  add_speculative_options(*cmd, *kv);  // --spec, --model-draft, --draft-max/min/p-min (as generate's)
  return {cmd, [options, kv, &globals] { return serve_command(*options, *kv, globals); }};
}

}  // namespace vkformer::cli
