// Prometheus text of the request stages and the scheduler's steps (request_metrics.hpp).
#include "request_metrics.hpp"

#include <sstream>

namespace vkformer::server {

void RequestMetrics::timeline(const Timeline& t) {
  if (t.first_sample == Timeline::Clock::time_point{}) return;  // no first token: not a way to one
  const double spans[kStageCount] = {
      Timeline::seconds(t.received, t.queued),         Timeline::seconds(t.queued, t.admitted),
      Timeline::seconds(t.admitted, t.prompt_done),    Timeline::seconds(t.prompt_done, t.first_sample),
      Timeline::seconds(t.first_sample, t.first_flush), Timeline::seconds(t.received, t.first_flush)};
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < kStageCount; ++i) {
    if (spans[i] < 0) continue;  // a stage it never reached
    Histogram& h = stages_[i];
    size_t b = 0;
    while (b < kBuckets.size() && spans[i] > kBuckets[b]) ++b;
    ++h.counts[b];
    h.sum += spans[i];
    ++h.count;
  }
}

void RequestMetrics::step(int64_t decode_rows, int64_t prompt_rows, double seconds) {
  ++steps_;
  decode_rows_ += decode_rows;
  prompt_rows_ += prompt_rows;
  std::lock_guard lock(mutex_);
  step_seconds_ += seconds;
}

std::string RequestMetrics::render() const {
  std::lock_guard lock(mutex_);
  std::ostringstream o;
  o << "# HELP vkformer_request_stage_seconds A request's way to its first token, by stage: parse (body to "
       "tokens), queue (waiting for a slot), prompt (in a slot until its last prompt row ran), sample (its "
       "first token sampled), flush (that text written to the client), total (body to first text written).\n"
       "# TYPE vkformer_request_stage_seconds histogram\n";
  for (size_t i = 0; i < kStageCount; ++i) {
    const Histogram& h = stages_[i];
    int64_t cumulative = 0;
    for (size_t b = 0; b <= kBuckets.size(); ++b) {
      cumulative += h.counts[b];
      std::ostringstream le;
      if (b < kBuckets.size()) le << kBuckets[b];
      else le << "+Inf";
      o << "vkformer_request_stage_seconds_bucket{stage=\"" << kStages[i] << "\",le=\"" << le.str() << "\"} "
        << cumulative << "\n";
    }
    o << "vkformer_request_stage_seconds_sum{stage=\"" << kStages[i] << "\"} " << h.sum << "\n"
      << "vkformer_request_stage_seconds_count{stage=\"" << kStages[i] << "\"} " << h.count << "\n";
  }
  o << "# HELP vkformer_prompt_tokens_cached_total Prompt tokens taken from a slot's KV cache instead of computed "
       "(prefix caching; included in vkformer_prompt_tokens_total).\n"
       "# TYPE vkformer_prompt_tokens_cached_total counter\nvkformer_prompt_tokens_cached_total "
    << cached_tokens_.load() << "\n";
  o << "# HELP vkformer_cancelled_requests_total Requests whose client left, by what they were doing then.\n"
       "# TYPE vkformer_cancelled_requests_total counter\n";
  const char* stages[] = {"queue", "prompt", "generation"};
  for (size_t i = 0; i < 3; ++i)
    o << "vkformer_cancelled_requests_total{stage=\"" << stages[i] << "\"} " << cancelled_[i].load() << "\n";
  o << "# HELP vkformer_scheduler_steps_total Batched passes the scheduler ran.\n"
       "# TYPE vkformer_scheduler_steps_total counter\nvkformer_scheduler_steps_total "
    << steps_.load() << "\n";
  o << "# HELP vkformer_scheduler_rows_total Rows those steps carried: one per decoding sequence (and "
       "one per speculative proposal after it, --spec), one per prompt token.\n"
       "# TYPE vkformer_scheduler_rows_total counter\n"
    << "vkformer_scheduler_rows_total{kind=\"decode\"} " << decode_rows_.load() << "\n"
    << "vkformer_scheduler_rows_total{kind=\"prompt\"} " << prompt_rows_.load() << "\n";
  o << "# HELP vkformer_scheduler_step_seconds_total Time spent in those steps.\n"
       "# TYPE vkformer_scheduler_step_seconds_total counter\nvkformer_scheduler_step_seconds_total "
    << step_seconds_ << "\n";
  return o.str();
}

}  // namespace vkformer::server
