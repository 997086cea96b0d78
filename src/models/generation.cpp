// Greedy and beam-search generation for the seq2seq model, on a KV-cached decoder.
//
// Beam search (the same algorithm as tests/fixtures/make_golden.py's uncached reference): every step
// extends each live beam by every token; candidates are ranked by summed log-probability (ties:
// lower beam index, then lower token id). Among the first k candidates, those ending in eos are
// finished with the score sum / ((5 + len) / 6)^alpha (GNMT's length penalty; len counts the
// generated tokens); the rest, then the following non-eos candidates, fill the k live beams.
// It stops once k hypotheses are finished or after max_new_tokens tokens, when the live beams
// are finished too; the best normalized score wins (ties: the earlier finished).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "cached_decoder.hpp"
#include "token_ids.hpp"
#include "vkformer/error.hpp"

namespace vkformer {

using models::CachedDecoder;

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double length_penalty(size_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

std::vector<int32_t> greedy(CachedDecoder& dec, const GenerateOptions& o, int64_t vocab,
                            GenerationStats& stats) {
  std::vector<int32_t> out;
  int32_t token = o.bos;
  for (int64_t t = 0; t < o.max_new_tokens; ++t) {
    auto logp = dec.step({token}, t);
    // The first maximum: the lowest id wins an exact tie.
    token = static_cast<int32_t>(std::max_element(logp.begin(), logp.begin() + vocab) - logp.begin());
    out.push_back(token);
    ++stats.steps;
    if (token == o.eos) break;
  }
  return out;
}

struct Hypothesis {
  std::vector<int32_t> tokens;  // generated, after bos
  double score = 0;             // summed log-probability
};

std::vector<int32_t> beam_search(CachedDecoder& dec, const GenerateOptions& o, int64_t vocab,
                                 GenerationStats& stats) {
  const size_t k = static_cast<size_t>(o.beam);
  std::vector<Hypothesis> beams(1);
  struct Finished {
    std::vector<int32_t> tokens;
    double normalized;
  };
  std::vector<Finished> finished;
  auto finish = [&](const Hypothesis& h) {
    finished.push_back({h.tokens, h.score / length_penalty(h.tokens.size(), o.length_penalty)});
  };
  for (int64_t t = 0; t < o.max_new_tokens; ++t) {
    std::vector<int32_t> last(k, o.bos);  // rows past the live beams are idle
    for (size_t b = 0; b < beams.size(); ++b)
      last[b] = beams[b].tokens.empty() ? o.bos : beams[b].tokens.back();
    auto logp = dec.step(last, t);
    ++stats.steps;

    struct Candidate {
      double score;
      size_t beam;
      int32_t token;
    };
    std::vector<Candidate> all;
    all.reserve(beams.size() * static_cast<size_t>(vocab));
    for (size_t b = 0; b < beams.size(); ++b)
      for (int32_t v = 0; v < vocab; ++v)
        all.push_back({beams[b].score + static_cast<double>(logp[b * vocab + v]), b, v});
    size_t keep = std::min(all.size(), 2 * k + 1);
    std::partial_sort(all.begin(), all.begin() + keep, all.end(), [](const Candidate& a, const Candidate& c) {
      if (a.score != c.score) return a.score > c.score;
      return a.beam != c.beam ? a.beam < c.beam : a.token < c.token;
    });

    std::vector<Hypothesis> next;
    std::vector<int32_t> parents(k, 0);
    for (size_t rank = 0; rank < keep; ++rank) {
      const Candidate& cand = all[rank];
      Hypothesis h = beams[cand.beam];
      h.tokens.push_back(cand.token);
      h.score = cand.score;
      if (cand.token == o.eos) {
        if (rank < k) finish(h);
      } else if (next.size() < k) {
        parents[next.size()] = static_cast<int32_t>(cand.beam);
        next.push_back(std::move(h));
      }
    }
    beams = std::move(next);
    if (finished.size() >= k || beams.empty()) break;
    dec.reorder(parents);
  }
  for (auto& h : beams) finish(h);
  size_t best = 0;
  for (size_t i = 1; i < finished.size(); ++i)
    if (finished[i].normalized > finished[best].normalized) best = i;
  return finished[best].tokens;
}

}  // namespace

std::vector<int32_t> Model::generate(const std::vector<int32_t>& src, const GenerateOptions& o) {
  ExclusiveUse::Scope one_thread(impl().in_use, "Model::generate");
  const ModelConfig& c = impl().config;
  const std::string call = "Model::generate";
  if (c.arch != ModelConfig::Arch::seq2seq)
    throw Error(ErrorCode::invalid_argument, call + ": needs a seq2seq model, this one is " +
                                                 ModelConfig::arch_name(c.arch));
  if (src.empty()) throw Error(ErrorCode::invalid_argument, call + ": the source is empty");
  if (static_cast<int64_t>(src.size()) > c.max_len)
    throw Error(ErrorCode::invalid_argument, call + ": the source has " + std::to_string(src.size()) +
                                                 " tokens, more than max_len " + std::to_string(c.max_len));
  models::check_token_ids(src, c.src_vocab, call, "source token", "position");
  if (o.bos < 0 || o.bos >= c.tgt_vocab)
    throw Error(ErrorCode::invalid_argument, call + ": bos " + std::to_string(o.bos) +
                                                 " is outside the target vocabulary [0, " +
                                                 std::to_string(c.tgt_vocab) + ")");
  if (o.max_new_tokens < 1 || o.max_new_tokens > c.max_len)
    throw Error(ErrorCode::invalid_argument,
                call + ": max_new_tokens is " + std::to_string(o.max_new_tokens) + ", expected 1.." +
                    std::to_string(c.max_len) + " (the config's max_len)");
  if (o.beam < 1 || o.beam > 64)
    throw Error(ErrorCode::invalid_argument, call + ": beam is " + std::to_string(o.beam) + ", expected 1..64");
  if (o.eos != -1 && (o.eos < 0 || o.eos >= c.tgt_vocab))
    throw Error(ErrorCode::invalid_argument, call + ": eos " + std::to_string(o.eos) +
                                                 " is outside the target vocabulary [0, " +
                                                 std::to_string(c.tgt_vocab) + ") (-1: no end token)");
  if (!std::isfinite(o.length_penalty))
    throw Error(ErrorCode::invalid_argument, call + ": length_penalty is " +
                                                 std::to_string(o.length_penalty) + ", expected a finite number");

  const int64_t rows = o.beam, s = static_cast<int64_t>(src.size());
  std::string key = std::to_string(rows) + "x" + std::to_string(s) + "x" + std::to_string(o.max_new_tokens);
  auto& dec = impl().decoders[key];
  if (!dec) dec = std::make_unique<CachedDecoder>(impl(), rows, s, o.max_new_tokens);

  GenerationStats stats;
  auto t0 = Clock::now();
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < rows; ++r) ids.insert(ids.end(), src.begin(), src.end());
  dec->prepare(HostTensor::from_i32({rows, s}, ids));
  stats.encode_ms = ms_since(t0);
  auto t1 = Clock::now();
  std::vector<int32_t> out = o.beam == 1 ? greedy(*dec, o, c.tgt_vocab, stats)
                                         : beam_search(*dec, o, c.tgt_vocab, stats);
  stats.decode_ms = ms_since(t1);
  stats.tokens = out.size();
  impl().stats = stats;
  return out;
}

}  // namespace vkformer
