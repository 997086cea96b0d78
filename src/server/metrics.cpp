// Prometheus text exposition of the server's counters (metrics.hpp).
#include "metrics.hpp"

#include <sstream>

namespace vkformer::server {

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  size_t b = 0;
  while (b < kTtftBuckets.size() && seconds > kTtftBuckets[b]) ++b;
  ++ttft_counts_[b];
  ttft_sum_ += seconds;
  ++ttft_count_;
}

void Metrics::generation_step(int64_t tokens, double seconds) {
  std::lock_guard lock(mutex_);
  step_tokens_ += static_cast<double>(tokens);
  step_seconds_ += seconds;
}

std::string Metrics::render(int parallel) const {
  std::lock_guard lock(mutex_);
  std::ostringstream o;
  int64_t errors = 0;
  o << "# HELP vkformer_requests_total HTTP requests answered, by endpoint and status.\n"
       "# TYPE vkformer_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    o << "vkformer_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
    if (key.second >= 400) errors += n;
  }
  // One counter or gauge: its HELP and TYPE lines, then its value.
  const auto metric = [&o](const char* name, const char* type, const char* help, const auto& value) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << value << '\n';
  };
  metric("vkformer_errors_total", "counter", "Requests answered with a 4xx or 5xx status.", errors);
  metric("vkformer_prompt_tokens_total", "counter", "Prompt tokens processed.", prompt_tokens_.load());
  metric("vkformer_completion_tokens_total", "counter", "Tokens generated.", completion_tokens_.load());
  metric("vkformer_queue_depth", "gauge", "Requests waiting for a slot.", queue_depth_.load());
  metric("vkformer_active_slots", "gauge", "Sequences generating now, of vkformer_slots.", active_slots_.load());
  o << "vkformer_slots " << parallel << "\n";
  metric("vkformer_open_connections", "gauge",
         "Connections being served now, the one asking included "
         "(at most --max-connections: those over it get 503 and are not counted).",
         open_connections_.load());
  metric("vkformer_client_disconnects_total", "counter", "Streams whose client went away before the end.",
         disconnects_.load());
  metric("vkformer_device_losses_total", "counter",
         "Times the device was found lost (its requests answered 503 device_lost).", device_losses_.load());
  metric("vkformer_model_reloads_total", "counter",
         "Times the language model was loaded again after a device loss.", model_reloads_.load());
  metric("vkformer_context_shifts_total", "counter",
         "Context shifts: a sequence that filled its slot's context "
         "forgot tokens after its n_keep and went on (--context-shift).",
         context_shifts_.load());
  metric("vkformer_context_shift_tokens_total", "counter", "Tokens the context shifts forgot.",
         context_shift_tokens_.load());
  // Speculative decoding, in the spirit of llama-server's llamacpp:n_draft_total and
  // llamacpp:n_draft_accepted_total.
  const int64_t drafted = drafted_.load(), accepted = accepted_.load(), passes = decode_passes_.load();
  metric("vkformer_draft_tokens_total", "counter", "Tokens proposed by speculative decoding (--spec) and verified.",
         drafted);
  metric("vkformer_draft_accepted_tokens_total", "counter", "Proposed tokens that verification kept.", accepted);
  metric("vkformer_draft_acceptance_rate", "gauge", "Kept proposals over verified ones since start (0 before any).",
         drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0);
  metric("vkformer_decode_passes_total", "counter",
         "Decoding sequences' turns in scheduler steps (one per sequence per step).", passes);
  metric("vkformer_tokens_per_decode_pass", "gauge",
         "Tokens a decoding sequence gained per step, on average since "
         "start (1 without speculative decoding; more as proposals are kept).",
         passes > 0 ? static_cast<double>(decode_pass_tokens_.load()) / static_cast<double>(passes) : 0.0);
  metric("vkformer_generation_tokens_per_second", "gauge",
         "Tokens decoded per second of decode steps, all sequences together, since start.",
         step_seconds_ > 0 ? step_tokens_ / step_seconds_ : 0.0);
  o << "# HELP vkformer_time_to_first_token_seconds From a request's arrival to its first token.\n"
       "# TYPE vkformer_time_to_first_token_seconds histogram\n";
  int64_t cumulative = 0;
  for (size_t b = 0; b <= kTtftBuckets.size(); ++b) {
    cumulative += ttft_counts_[b];
    o << "vkformer_time_to_first_token_seconds_bucket{le=\""
      << (b < kTtftBuckets.size() ? std::to_string(kTtftBuckets[b]).substr(0, 5) : std::string("+Inf"))
      << "\"} " << cumulative << "\n";
  }
  o << "vkformer_time_to_first_token_seconds_sum " << ttft_sum_ << "\n"
    << "vkformer_time_to_first_token_seconds_count " << ttft_count_ << "\n";
  return o.str();
}

}  // namespace vkformer::server
