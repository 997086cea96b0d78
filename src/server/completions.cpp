// POST /v1/chat/completions and /v1/completions: a request checked and tokenized, queued with
// the scheduler, and answered as one JSON object or as server-sent events.
#include <cstdio>
#include <ctime>

#include "api_error.hpp"
#include "client_socket.hpp"
#include "requests.hpp"
#include "server_impl.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/llm.hpp"

namespace vkformer {

using nlohmann::json;
using server::ApiError;
using server::bad_request;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// How long a streaming handler waits for text before writing an SSE comment, which is how it
// finds out that a client waiting in the queue has gone.
constexpr std::chrono::milliseconds kStreamPoll{250};
constexpr int kPollsPerKeepAlive = 8;

// A request the device failed under (issue 39): 503, as it may be retried. A lost device's
// message says that the model is being loaded again; out of device memory, what to try.
ApiError device_failure(const server::GenerationJob& job) {
  const std::string reason = job.finish_reason();
  return ApiError(503, "server_error",
                  (reason == "out_of_memory" ? "generation failed, out of device memory: " : "generation failed: ") +
                      job.error(),
                  "", reason);
}

}  // namespace

namespace {
// Counts a completion response until it is written (shutdown() waits for them): a non-streamed
// one until its handler returns, a stream until httplib releases its content provider.
struct InFlight {
  std::atomic<int>& count;
  explicit InFlight(std::atomic<int>& c) : count(c) { ++count; }
  ~InFlight() { --count; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
};
}  // namespace

void ServerImpl::handle_completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  const auto received = server::Timeline::Clock::now();
  auto in_flight = std::make_shared<InFlight>(completions_in_flight_);
  check_ready();
  if (!scheduler_) throw ApiError(404, "invalid_request_error", "this server has no language model (start it with --model)", "model", "model_not_found");
  const json body = server::parse_body(req.body, options_.max_json_depth);
  const GgufTokenizer& tokenizer = *tokenizer_;
  server::GenerationParams params;
  std::vector<int32_t> prompt;
  if (chat) {
    server::ChatRequest r = server::parse_chat_request(body);
    params = std::move(r.params);
    if (params.model != model_id_) throw ApiError(404, "invalid_request_error", "the model '" + params.model.substr(0, 100) + "' does not exist: this server has '" + model_id_ + "'", "model", "model_not_found");
    if (!chat_template_)
      throw ApiError(400, "invalid_request_error",
                     "this model's chat template cannot be used (" + chat_template_problem_ +
                         "); use /v1/completions, or start the server with --chat-template NAME",
                     "messages", "unsupported_chat_template");
    // A template that writes the BOS token itself (Llama 3, Gemma) gets no second one.
    prompt = tokenizer.encode(chat_template_->apply(r.messages), !chat_template_->writes_bos(), true);
  } else {
    server::CompletionRequest r = server::parse_completion_request(body);
    params = std::move(r.params);
    if (params.model != model_id_) throw ApiError(404, "invalid_request_error", "the model '" + params.model.substr(0, 100) + "' does not exist: this server has '" + model_id_ + "'", "model", "model_not_found");
    if (r.prompt_tokens.empty()) {
      prompt = tokenizer.encode(r.prompt, true, true);
    } else {
      for (int32_t id : r.prompt_tokens)
        if (id >= static_cast<int32_t>(tokenizer.vocab_size()))
          throw bad_request("prompt", "'prompt' token " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(tokenizer.vocab_size()) + ")");
      prompt = std::move(r.prompt_tokens);
    }
  }
  const int64_t n = static_cast<int64_t>(prompt.size()), context = context_;
  if (n == 0) throw bad_request(chat ? "messages" : "prompt", "the prompt has no tokens");
  if (n > max_prompt_tokens_)
    throw bad_request(chat ? "messages" : "prompt", "the prompt has " + std::to_string(n) + " tokens, more than the limit of " + std::to_string(max_prompt_tokens_) + " (--max-prompt-tokens, at most --ctx - 1)", "context_length_exceeded");
  if (params.max_tokens && *params.max_tokens > max_tokens_)
    throw bad_request("max_tokens", "'max_tokens' is " + std::to_string(*params.max_tokens) + ", more than the limit of " + std::to_string(max_tokens_) + " (--max-tokens)");
  // With --context-shift a sequence goes on past its context (the shift makes room), so only the
  // prompt must fit; without, prompt and completion together.
  if (!options_.context_shift && params.max_tokens && n + *params.max_tokens > context)
    throw bad_request("max_tokens", "the prompt's " + std::to_string(n) + " tokens and max_tokens " + std::to_string(*params.max_tokens) + " exceed the context of " + std::to_string(context) + " tokens per sequence (--ctx; --context-shift lets a sequence go on past it)", "context_length_exceeded");
  // n_keep as llama-server counts it: after the BOS token, which is kept too; -1: the whole
  // prompt (at most what a shift can keep).
  const bool bos = tokenizer.add_bos();
  if (params.n_keep && *params.n_keep > keep_limit_)
    throw bad_request("n_keep", "'n_keep' is " + std::to_string(*params.n_keep) + ", more than the " + std::to_string(keep_limit_) + " tokens a context shift can keep in the context of " + std::to_string(context) + " tokens per sequence (--ctx - 4" + (bos ? ", after the BOS token)" : ")"));
  const int64_t n_keep = params.n_keep.value_or(options_.keep);
  if (params.n_discard && *params.n_discard >= context)
    throw bad_request("n_discard", "'n_discard' is " + std::to_string(*params.n_discard) + ", not less than the context of " + std::to_string(context) + " tokens per sequence (--ctx)");

  server::GenerationRequest g;
  g.max_tokens = params.max_tokens.value_or(options_.context_shift ? max_tokens_ : std::min(max_tokens_, context - n));
  g.n_keep = n_keep < 0 ? std::min(n, context - 4) : n_keep + (bos ? 1 : 0);
  g.n_discard = params.n_discard.value_or(options_.n_discard);
  g.prompt = std::move(prompt);
  g.sampling = params.sampling;
  g.stop = params.stop;
  g.cache_prompt = params.cache_prompt;
  g.received = received;
  auto job = scheduler_->submit(std::move(g));

  const std::string id = next_id(chat ? "chatcmpl-" : "cmpl-");
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const char* object = chat ? "chat.completion" : "text_completion";
  auto usage = [n](const server::GenerationJob& j) {
    const int64_t completion = j.completion_tokens();
    return json{{"prompt_tokens", n},
                {"completion_tokens", completion},
                {"total_tokens", n + completion},
                {"prompt_tokens_details", {{"cached_tokens", j.timeline().cached_tokens}}}};
  };

  if (!params.stream) {
    // Nothing is written until the end, so the socket is watched instead: a client that leaves
    // frees its slot at the next step, as a streaming one does.
    server::ClientSocket client(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    std::string text, piece;
    while (!job->take(piece, kStreamPoll)) {
      text += piece;
      if (!job->cancelled() && !client.connected()) job->cancel();
    }
    text += piece;
    job->note([](server::Timeline& t) { t.first_flush = server::Timeline::Clock::now(); });
    finished(id, *job, n);
    if (job->finish_reason() == "shutdown") throw ApiError(503, "server_error", job->error(), "", "server_shutting_down");
    if (job->finish_reason() == "error") throw ApiError(500, "server_error", "generation failed: " + job->error());
    if (job->finish_reason() == "device_lost" || job->finish_reason() == "out_of_memory") throw device_failure(*job);
    json choice = {{"index", 0}, {"finish_reason", job->finish_reason()}, {"logprobs", nullptr}};
    if (chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
    else choice["text"] = text;
    json out = {{"id", id}, {"object", object}, {"created", created}, {"model", model_id_},
                {"choices", json::array({choice})}, {"usage", usage(*job)}};
    res.set_content(dump(out), "application/json");
    return;
  }

  // Streaming: one SSE event per piece of text, then the finish reason, usage if asked, [DONE].
  struct Stream {
    std::shared_ptr<server::GenerationJob> job;
    server::ClientSocket client;
    bool started = false, flushed = false;
    int quiet_polls = 0;
  };
  // A client that leaves while its request waits or its prompt is read is noticed by its socket
  // (nothing is written then to fail), so its slot is free at the next step, not after its prompt.
  auto stream = std::make_shared<Stream>(
      Stream{job, server::ClientSocket(req.local_addr, req.local_port, req.remote_addr, req.remote_port)});
  const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
  const bool include_usage = params.include_usage;
  const std::string model = model_id_;
  auto event = [=](const json& delta_or_text, const json& finish) {
    json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (chat) choice["delta"] = delta_or_text;
    else choice["text"] = delta_or_text;
    return "data: " + dump(json{{"id", id}, {"object", chunk_object}, {"created", created}, {"model", model}, {"choices", json::array({choice})}}) + "\n\n";
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=, this](size_t, httplib::DataSink& sink) {
        Stream& s = *stream;
        auto write = [&](const std::string& data) { return sink.write(data.data(), data.size()); };
        if (!s.started) {
          s.started = true;
          if (chat && !write(event(json{{"role", "assistant"}, {"content", ""}}, nullptr))) return false;
        }
        std::string piece;
        const bool done = s.job->take(piece, kStreamPoll);
        if (!piece.empty()) {
          s.quiet_polls = 0;
          if (!write(event(chat ? json{{"content", piece}} : json(piece), nullptr))) return false;
          if (!s.flushed) {
            s.flushed = true;
            s.job->note([](server::Timeline& t) { t.first_flush = server::Timeline::Clock::now(); });
          }
        } else if (!done && !s.client.connected()) {
          return false;  // the client is gone: cancelled (below)
        } else if (!done && ++s.quiet_polls >= kPollsPerKeepAlive) {
          s.quiet_polls = 0;
          if (!write(": waiting\n\n")) return false;
        }
        if (!done) return true;
        const std::string reason = s.job->finish_reason();
        finished(id, *s.job, n);
        if (reason == "error" || reason == "shutdown" || reason == "device_lost" || reason == "out_of_memory") {
          // The final event: an error in OpenAI's shape (the openai package raises it).
          json e = reason == "shutdown" ? ApiError(503, "server_error", s.job->error(), "", "server_shutting_down").to_json()
                   : reason == "error"  ? ApiError(500, "server_error", "generation failed: " + s.job->error()).to_json()
                                        : device_failure(*s.job).to_json();
          if (!write("data: " + dump(e) + "\n\n")) return false;
        } else {
          if (!write(event(chat ? json::object() : json(""), reason))) return false;
          if (include_usage) {
            json u = {{"id", id}, {"object", chunk_object}, {"created", created}, {"model", model},
                      {"choices", json::array()}, {"usage", usage(*s.job)}};
            if (!write("data: " + dump(u) + "\n\n")) return false;
          }
        }
        if (!write("data: [DONE]\n\n")) return false;
        sink.done();
        return true;
      },
      [stream, in_flight](bool) {
        stream->job->cancel();  // a gone client frees its slot at the next step
        (void)in_flight;        // held until the stream is written
      });
}

void ServerImpl::finished(const std::string& id, const server::GenerationJob& job, int64_t prompt_tokens) {
  const server::Timeline t = job.timeline();
  request_metrics_.timeline(t);
  if (!options_.verbose) return;
  using server::Timeline;
  auto at = [&](Timeline::Clock::time_point when) {  // seconds since the body was read, or "-"
    const double s = Timeline::seconds(t.received, when);
    char buf[32];
    std::snprintf(buf, sizeof buf, s < 0 ? "-" : "%.3f s", s);
    return std::string(buf);
  };
  std::fprintf(stderr,
               "vkformer serve: %s: %lld prompt tokens (%lld cached), %lld generated, %s; queued %s, in a slot %s, "
               "prompt done %s after %d steps, first token sampled %s, first flush %s, done %s\n",
               id.c_str(), static_cast<long long>(prompt_tokens), static_cast<long long>(t.cached_tokens),
               static_cast<long long>(job.completion_tokens()), job.finish_reason().c_str(), at(t.queued).c_str(),
               at(t.admitted).c_str(), at(t.prompt_done).c_str(), t.prompt_steps, at(t.first_sample).c_str(),
               at(t.first_flush).c_str(), at(Timeline::Clock::now()).c_str());
}

}  // namespace vkformer
