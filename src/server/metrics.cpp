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
  o << "# HELP vkformer_errors_total Requests answered with a 4xx or 5xx status.\n"
       "# TYPE vkformer_errors_total counter\nvkformer_errors_total "
    << errors << "\n";
  o << "# HELP vkformer_prompt_tokens_total Prompt tokens processed.\n"
       "# TYPE vkformer_prompt_tokens_total counter\nvkformer_prompt_tokens_total "
    << prompt_tokens_.load() << "\n";
  o << "# HELP vkformer_completion_tokens_total Tokens generated.\n"
       "# TYPE vkformer_completion_tokens_total counter\nvkformer_completion_tokens_total "
    << completion_tokens_.load() << "\n";
  o << "# HELP vkformer_queue_depth Requests waiting for a slot.\n"
       "# TYPE vkformer_queue_depth gauge\nvkformer_queue_depth "
    << queue_depth_.load() << "\n";
  o << "# HELP vkformer_active_slots Sequences generating now, of vkformer_slots.\n"
       "# TYPE vkformer_active_slots gauge\nvkformer_active_slots "
    << active_slots_.load() << "\nvkformer_slots " << parallel << "\n";
  o << "# HELP vkformer_open_connections Connections being served now, the one asking included "
       "(at most --max-connections: those over it get 503 and are not counted).\n"
       "# TYPE vkformer_open_connections gauge\nvkformer_open_connections "
    << open_connections_.load() << "\n";
  o << "# HELP vkformer_client_disconnects_total Streams whose client went away before the end.\n"
       "# TYPE vkformer_client_disconnects_total counter\nvkformer_client_disconnects_total "
    << disconnects_.load() << "\n";
  o << "# HELP vkformer_device_losses_total Times the device was found lost (its requests answered 503 device_lost).\n"
       "# TYPE vkformer_device_losses_total counter\nvkformer_device_losses_total "
    << device_losses_.load() << "\n";
  o << "# HELP vkformer_model_reloads_total Times the language model was loaded again after a device loss.\n"
       "# TYPE vkformer_model_reloads_total counter\nvkformer_model_reloads_total "
    << model_reloads_.load() << "\n";
  o << "# HELP vkformer_context_shifts_total Context shifts: a sequence that filled its slot's context "
       "forgot tokens after its n_keep and went on (--context-shift).\n"
       "# TYPE vkformer_context_shifts_total counter\nvkformer_context_shifts_total "
    << context_shifts_.load() << "\n";
  o << "# HELP vkformer_context_shift_tokens_total Tokens the context shifts forgot.\n"
       "# TYPE vkformer_context_shift_tokens_total counter\nvkformer_context_shift_tokens_total "
    << context_shift_tokens_.load() << "\n";
  // Speculative decoding, in the spirit of llama-server's llamacpp:n_draft_total and
  // llamacpp:n_draft_accepted_total.
  const int64_t drafted = drafted_.load(), accepted = accepted_.load(), passes = decode_passes_.load();
  o << "# HELP vkformer_draft_tokens_total Tokens proposed by speculative decoding (--spec) and verified.\n"
       "# TYPE vkformer_draft_tokens_total counter\nvkformer_draft_tokens_total "
    << drafted << "\n";
  o << "# HELP vkformer_draft_accepted_tokens_total Proposed tokens that verification kept.\n"
       "# TYPE vkformer_draft_accepted_tokens_total counter\nvkformer_draft_accepted_tokens_total "
    << accepted << "\n";
  o << "# HELP vkformer_draft_acceptance_rate Kept proposals over verified ones since start (0 before any).\n"
       "# TYPE vkformer_draft_acceptance_rate gauge\nvkformer_draft_acceptance_rate "
    << (drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0) << "\n";
  o << "# HELP vkformer_decode_passes_total Decoding sequences' turns in scheduler steps (one per sequence "
       "per step).\n"
       "# TYPE vkformer_decode_passes_total counter\nvkformer_decode_passes_total "
    << passes << "\n";
  o << "# HELP vkformer_tokens_per_decode_pass Tokens a decoding sequence gained per step, on average since "
       "start (1 without speculative decoding; more as proposals are kept).\n"
       "# TYPE vkformer_tokens_per_decode_pass gauge\nvkformer_tokens_per_decode_pass "
    << (passes > 0 ? static_cast<double>(decode_pass_tokens_.load()) / static_cast<double>(passes) : 0.0) << "\n";
  o << "# HELP vkformer_generation_tokens_per_second Tokens decoded per second of decode steps, "
       "all sequences together, since start.\n"
       "# TYPE vkformer_generation_tokens_per_second gauge\nvkformer_generation_tokens_per_second "
    << (step_seconds_ > 0 ? step_tokens_ / step_seconds_ : 0.0) << "\n";
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
