// BatchedLanguageModel (vkformer/batched_llm.hpp): every row of a batched decoding step against the
// same sequence run alone through LanguageModel (itself checked against a double-precision llama
// and PyTorch in llama_model_test), with sequences at different positions and lengths, prompts
// over several chunks, slots joining and leaving between steps, padding rows of a bucket, and
// an idle slot that must keep its cache. On the tiny llama and SmolLM2-135M-Instruct, and on the
// families whose attention takes masks (Gemma 2's soft-capping, sliding windows: BatchedFamilies).
//
// Tolerance: max |logit difference| <= 1e-4 x max|logit| of the row (f32 activations). Alone and
// batched, the same kernels read the same numbers; only the matmul's accumulation order differs
// (a one-row kernel against a multi-row one), which moves logits by ~1e-6 relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "fed_token_ids.hpp"
#include "test_device.hpp"
#include "fetched_models.hpp"
#include "test_util.hpp"
#include "vkformer/batched_llm.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kTolerance = 1e-4;

fs::path tiny_model() { return fs::path(VKF_LLAMA_GOLDEN_DIR) / "tiny" / "tiny_llama_tied.gguf"; }

// One sequence of a schedule: its prompt and the tokens it decodes afterwards, and the logits
// LanguageModel gives for it alone (after the prompt, then after each decoded token).
struct Sequence {
  std::vector<int32_t> prompt, decoded;
  std::vector<std::vector<float>> alone;
};

// The model at `path` alone, with the context and activations of the batched one of `o`.
LanguageModel load_alone(Device& device, const fs::path& path, const BatchedLanguageModelOptions& o) {
  LanguageModelOptions lo;
  lo.context = o.context;
  lo.activations = o.activations;
  return LanguageModel::load(device, path, lo);
}

void run_alone(LanguageModel& lm, Sequence& s) {
  lm.reset();
  s.alone.push_back(lm.append(s.prompt));
  for (size_t i = 0; i + 1 < s.decoded.size(); ++i) s.alone.push_back(lm.append({&s.decoded[i], 1}));
}

// Sequence i: a prompt of prompt_len[i] ids (seed prompt_seed + i) and decode_len[i] decoded ids
// (seed decode_seed + i), each run alone on `alone` first.
std::vector<Sequence> sequences_alone(LanguageModel& alone, std::span<const int64_t> prompt_len,
                                      std::span<const int64_t> decode_len, uint32_t prompt_seed, uint32_t decode_seed) {
  const int64_t vocab = alone.config().vocab_size;
  std::vector<Sequence> seqs(prompt_len.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].prompt = ids(prompt_len[i], vocab, prompt_seed + static_cast<uint32_t>(i));
    seqs[i].decoded = ids(decode_len[i], vocab, decode_seed + static_cast<uint32_t>(i));
    run_alone(alone, seqs[i]);
  }
  return seqs;
}

// A sequence of a schedule in its slot: prompt tokens in the cache (run_mixed_schedule's), decoded
// tokens fed, and whether it is decoding yet.
struct Live {
  size_t seq;
  int slot;
  size_t prompt_done = 0, next = 0;
  bool decoding = false;
};

// What both schedules keep: the sequences in their slots (a joining one takes the lowest free
// slot, one whose decoded tokens are all fed leaves and frees it), and the worst relative error.
class Schedule {
 public:
  Schedule(const BatchedLanguageModel& lm, const std::vector<Sequence>& seqs)
      : vocab(static_cast<size_t>(lm.config().vocab_size)), seqs_(seqs), used_(static_cast<size_t>(lm.slots()), false) {}

  // Whether step `step` runs: some sequence has yet to join or is live. A schedule that has not
  // ended after 1000 steps fails.
  bool goes_on(int step) const {
    if (joined_ == seqs_.size() && live.empty()) return false;
    EXPECT_LT(step, 1000) << "the schedule does not end";
    return step < 1000;
  }
  // Sequence `seq` joins the lowest free slot, which it returns; nullopt where none is free.
  std::optional<int> join(size_t seq) {
    auto free = std::find(used_.begin(), used_.end(), false);
    if (free == used_.end()) return std::nullopt;
    *free = true;
    const int slot = static_cast<int>(free - used_.begin());
    live.push_back({seq, slot});
    ++joined_;
    return slot;
  }
  void leave_when_done() {
    for (size_t r = live.size(); r-- > 0;)
      if (live[r].next == seqs_[live[r].seq].decoded.size()) {
        used_[static_cast<size_t>(live[r].slot)] = false;
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(r));
      }
  }
  // A logits row against the sequence alone (`what`: which row, for the failure).
  void check(std::span<const float> got, const std::vector<float>& want, const std::string& what) {
    const double err = relative_error(got, want);
    EXPECT_LE(err, kTolerance) << what;
    worst = std::max(worst, err);
  }

  std::vector<Live> live;
  double worst = 0;
  const size_t vocab;

 private:
  const std::vector<Sequence>& seqs_;
  std::vector<bool> used_;
  size_t joined_ = 0;
};

// A schedule: in each step, sequences whose turn has come join a free slot (their prompt goes
// in through append, in chunks), then every joined sequence with tokens left decodes one in a
// single batched step, except one paused for steps [pause.first, pause.second] (its slot idles
// while the others step); a sequence leaves when its tokens are done, freeing its slot.
// Checks every logits row against the sequence alone; returns the worst relative error.
struct Pause {
  size_t seq = SIZE_MAX;
  int from = -1, to = -1;
};
double run_schedule(BatchedLanguageModel& lm, std::vector<Sequence>& seqs, const std::vector<int>& join_step,
                    std::map<int, int>* rows_seen, Pause pause = {}) {
  Schedule sched(lm, seqs);
  std::vector<Live>& live = sched.live;
  const size_t vocab = sched.vocab;
  for (int step = 0; sched.goes_on(step); ++step) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (join_step[i] != step) continue;
      const std::optional<int> slot = sched.join(i);
      if (!slot) {
        ADD_FAILURE() << "no free slot for sequence " << i;
        return sched.worst;
      }
      lm.reset(*slot);
      sched.check(lm.append(*slot, seqs[i].prompt), seqs[i].alone[0],
                  "sequence " + std::to_string(i) + " after its prompt, slot " + std::to_string(*slot));
    }
    std::vector<BatchedLanguageModel::Next> batch;
    std::vector<size_t> in_batch;  // live entries, in batch order
    for (size_t r = 0; r < live.size(); ++r) {
      const Live& l = live[r];
      if (l.seq == pause.seq && step >= pause.from && step <= pause.to) continue;
      batch.push_back({l.slot, seqs[l.seq].decoded[l.next]});
      in_batch.push_back(r);
    }
    if (batch.empty()) continue;
    if (rows_seen) ++(*rows_seen)[lm.decode_rows(static_cast<int>(batch.size()))];
    const std::vector<float> got = lm.decode(batch);
    EXPECT_EQ(got.size(), batch.size() * vocab);
    for (size_t r = 0; r < in_batch.size(); ++r) {
      Live& l = live[in_batch[r]];
      ++l.next;
      if (l.next < seqs[l.seq].decoded.size())  // the last token's logits are not in `alone`
        sched.check(std::span(got).subspan(r * vocab, vocab), seqs[l.seq].alone[l.next],
                    "sequence " + std::to_string(l.seq) + " (slot " + std::to_string(l.slot) + "), decoded token " +
                        std::to_string(l.next) + ", step " + std::to_string(step) + " of " +
                        std::to_string(batch.size()) + " rows");
    }
    sched.leave_when_done();
  }
  return sched.worst;
}

// " 1:3 2:5 4:7": how many steps ran with how many rows.
std::string rows_text(const std::map<int, int>& rows) {
  std::string text;
  for (auto [r, n] : rows) text += " " + std::to_string(r) + ":" + std::to_string(n);
  return text;
}

// A server's schedule (src/server/scheduler.cpp) through BatchedLanguageModel::step: in each
// step every decoding sequence feeds its next token, then sequences still reading their prompts
// take chunks of them, shortest remaining first, within `budget` tokens; a sequence joins the
// free slot when its turn comes and leaves when its tokens are done. Every logits row (a
// finished prompt's, a decoded token's) is checked against the sequence alone; returns the
// worst relative error, and counts the steps that mixed decoding and prompt rows.
double run_mixed_schedule(BatchedLanguageModel& lm, std::vector<Sequence>& seqs, std::vector<int> join_step,
                          int64_t budget, int* mixed_steps, std::set<int64_t>* buckets) {
  Schedule sched(lm, seqs);
  std::vector<Live>& live = sched.live;
  const size_t vocab = sched.vocab;
  for (int step = 0; sched.goes_on(step); ++step) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (join_step[i] > step || join_step[i] < 0) continue;
      const std::optional<int> slot = sched.join(i);
      if (!slot) continue;  // waits for a slot
      lm.truncate(*slot, 0);
      join_step[i] = -1;  // joined
    }
    std::vector<BatchedLanguageModel::Piece> pieces;
    std::vector<size_t> owner;  // live entry of each piece
    int64_t left = budget;
    for (size_t r = 0; r < live.size(); ++r)
      if (live[r].decoding) {
        pieces.push_back({live[r].slot, {&seqs[live[r].seq].decoded[live[r].next], 1}, true});
        owner.push_back(r);
        --left;
      }
    const size_t decode_pieces = pieces.size();
    std::vector<size_t> reading;
    for (size_t r = 0; r < live.size(); ++r)
      if (!live[r].decoding) reading.push_back(r);
    std::stable_sort(reading.begin(), reading.end(), [&](size_t a, size_t b) {
      return seqs[live[a].seq].prompt.size() - live[a].prompt_done < seqs[live[b].seq].prompt.size() - live[b].prompt_done;
    });
    for (size_t r : reading) {
      const std::vector<int32_t>& prompt = seqs[live[r].seq].prompt;
      const size_t n = std::min<size_t>(prompt.size() - live[r].prompt_done, static_cast<size_t>(std::max<int64_t>(left, 0)));
      if (n == 0) break;
      pieces.push_back({live[r].slot, std::span(prompt).subspan(live[r].prompt_done, n),
                        live[r].prompt_done + n == prompt.size()});
      owner.push_back(r);
      left -= static_cast<int64_t>(n);
    }
    if (pieces.empty()) continue;
    int64_t rows = 0;
    for (const auto& p : pieces) rows += static_cast<int64_t>(p.tokens.size());
    if (buckets) buckets->insert(lm.step_bucket(rows));
    if (mixed_steps && decode_pieces > 0 && pieces.size() > decode_pieces) ++*mixed_steps;
    const std::vector<float> got = lm.step(pieces);
    size_t k = 0;  // logits row
    for (size_t i = 0; i < pieces.size(); ++i) {
      Live& l = live[owner[i]];
      const Sequence& q = seqs[l.seq];
      if (l.decoding) {
        ++l.next;
      } else {
        l.prompt_done += pieces[i].tokens.size();
        if (l.prompt_done == q.prompt.size()) l.decoding = true;
      }
      if (!pieces[i].logits) continue;
      const std::span<const float> row = std::span(got).subspan(k++ * vocab, vocab);
      if (l.next < q.decoded.size())  // the last token's logits are not in `alone`
        sched.check(row, q.alone[l.next],
                    "sequence " + std::to_string(l.seq) + " (slot " + std::to_string(l.slot) + "), after " +
                        (l.next == 0 ? "its prompt" : "decoded token " + std::to_string(l.next)) + ", step " +
                        std::to_string(step) + " of " + std::to_string(rows) + " rows");
    }
    EXPECT_EQ(k * vocab, got.size()) << "step " << step << ": logits rows";
    sched.leave_when_done();
  }
  return sched.worst;
}


// Speculative verification per slot (Piece::every_logit, then truncate() as the rollback), as a
// server does it: three slots hold prompts of 10, 20 and 7 tokens; one step carries slot 0's
// "last token + 7 proposals" (8 rows: past a sliding window of 6), slot 1's single decoding
// token and slot 2's 3 rows; every row's logits must equal the sequence's alone after the same
// tokens. Then slot 0 keeps 2 of its proposals and slot 2 one (the rest rolled back by
// truncate), and a second step goes on from there: its rows must equal the sequence alone
// WITHOUT the rejected tokens, and slot 1 (never rolled back) its own sequence's. Returns the
// worst relative error.
std::vector<std::vector<float>> logits_after_each(LanguageModel& alone, const std::vector<int32_t>& prompt,
                                                  const std::vector<int32_t>& tokens) {
  alone.reset();
  alone.append(prompt);
  std::vector<std::vector<float>> out;
  for (int32_t t : tokens) out.push_back(alone.append({&t, 1}));
  return out;
}

double verify_and_roll_back(BatchedLanguageModel& lm, LanguageModel& alone) {
  const int64_t vocab = alone.config().vocab_size;
  const std::vector<int32_t> p0 = ids(10, vocab, 700), p1 = ids(20, vocab, 701), p2 = ids(7, vocab, 702);
  const std::vector<int32_t> a = ids(8, vocab, 703), b = ids(2, vocab, 704), c = ids(3, vocab, 705);
  const std::vector<int32_t> x = ids(3, vocab, 706), y = ids(2, vocab, 707);
  using P = BatchedLanguageModel::Piece;
  lm.step(std::vector<P>{{0, p0}, {1, p1}, {2, p2}});
  double worst = 0;
  auto compare = [&](std::span<const float> got, size_t first, const std::vector<std::vector<float>>& want,
                     size_t from, size_t n, const char* what) {
    for (size_t i = 0; i < n; ++i) {
      const double err = relative_error(got.subspan((first + i) * static_cast<size_t>(vocab), static_cast<size_t>(vocab)),
                                        want[from + i]);
      worst = std::max(worst, err);
      EXPECT_LE(err, kTolerance) << what << ", row " << i;
    }
  };
  // Step 1: 8 + 1 + 3 rows, 8 + 1 + 3 logits rows.
  const std::vector<float> first =
      lm.step(std::vector<P>{{0, a, false, true}, {1, std::span(b).first(1), true}, {2, c, false, true}});
  EXPECT_EQ(first.size(), 12u * static_cast<size_t>(vocab));
  if (first.size() != 12u * static_cast<size_t>(vocab)) return 1.0;
  compare(first, 0, logits_after_each(alone, p0, a), 0, 8, "slot 0's verification");
  compare(first, 8, logits_after_each(alone, p1, b), 0, 1, "slot 1's decoding row");
  compare(first, 9, logits_after_each(alone, p2, c), 0, 3, "slot 2's verification");
  // Roll back: slot 0 keeps a[0..3) (its last token and 2 proposals), slot 2 c[0..2).
  lm.truncate(0, lm.position(0) - 5);
  lm.truncate(2, lm.position(2) - 1);
  EXPECT_EQ(lm.position(0), 13);
  EXPECT_EQ(lm.position(1), 21);
  EXPECT_EQ(lm.position(2), 9);
  const std::vector<float> second =
      lm.step(std::vector<P>{{0, x, false, true}, {1, std::span(b).subspan(1), true}, {2, y, false, true}});
  EXPECT_EQ(second.size(), 6u * static_cast<size_t>(vocab));
  if (second.size() != 6u * static_cast<size_t>(vocab)) return 1.0;
  std::vector<int32_t> kept_a(a.begin(), a.begin() + 3), kept_c(c.begin(), c.begin() + 2);
  kept_a.insert(kept_a.end(), x.begin(), x.end());
  kept_c.insert(kept_c.end(), y.begin(), y.end());
  compare(second, 0, logits_after_each(alone, p0, kept_a), 3, 3, "slot 0 after its rollback");
  compare(second, 3, logits_after_each(alone, p1, b), 1, 1, "slot 1 (not rolled back)");
  compare(second, 4, logits_after_each(alone, p2, kept_c), 2, 2, "slot 2 after its rollback");
  return worst;
}

class BatchedTinyLlama : public DeviceTest {};

// Five sequences in four slots: prompts of 5, 70 (two chunks), 1, 17 and 64 tokens, decoding
// 3 to 12 tokens each, joining at different steps (the last one in a slot another left); steps
// of 1, 2, 3 (a bucket of 4 with a padding row) and 4 rows; sequence 0 paused for two steps of
// 3 rows, so a padded step runs while its slot holds a live sequence.
TEST_F(BatchedTinyLlama, EveryRowEqualsItsSequenceAlone) {
  BatchedLanguageModelOptions o{.context = 96, .slots = 4};
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), tiny_model(), o);
  EXPECT_EQ(lm.slots(), 4);
  EXPECT_EQ(lm.context(), 96);
  EXPECT_EQ(lm.decode_rows(1), 1);
  EXPECT_EQ(lm.decode_rows(3), 4);
  BatchedLanguageModelOptions three = o;
  three.slots = 3;
  EXPECT_EQ(BatchedLanguageModel::load(device(), tiny_model(), three).decode_rows(3), 3);  // never more than slots
  LanguageModel alone = load_alone(device(), tiny_model(), o);
  const int64_t prompt_len[] = {5, 70, 1, 17, 64};
  const int64_t decode_len[] = {12, 6, 9, 3, 8};
  std::vector<Sequence> seqs = sequences_alone(alone, prompt_len, decode_len, 0, 100);
  std::map<int, int> rows;
  const double worst = run_schedule(lm, seqs, {0, 0, 1, 2, 9}, &rows, {.seq = 0, .from = 3, .to = 4});
  std::printf("tiny batched: worst max|dlogit| / max|logit| %.2e\n", worst);
  EXPECT_GT(rows[1], 0);
  EXPECT_GT(rows[2], 0);
  EXPECT_GE(rows[4], 4);  // 3 sequences (padded) and 4
}

// The same with f16 activations and cache (tolerance as f16 allows: 1e-2).
TEST_F(BatchedTinyLlama, F16ActivationsEqualTheSequenceAlone) {
  BatchedLanguageModelOptions o{.activations = DType::f16, .context = 80, .slots = 2};
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), tiny_model(), o);
  LanguageModel alone = load_alone(device(), tiny_model(), o);
  std::vector<Sequence> seqs(2);
  seqs[0].prompt = ids(9, alone.config().vocab_size, 1);
  seqs[0].decoded = ids(4, alone.config().vocab_size, 2);
  seqs[1].prompt = ids(3, alone.config().vocab_size, 3);
  seqs[1].decoded = ids(4, alone.config().vocab_size, 4);
  for (auto& s : seqs) run_alone(alone, s);
  double worst = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    lm.reset(static_cast<int>(i));
    worst = std::max(worst, relative_error(lm.append(static_cast<int>(i), seqs[i].prompt), seqs[i].alone[0]));
  }
  for (size_t t = 0; t + 1 < 4; ++t) {
    const std::vector<BatchedLanguageModel::Next> b{{0, seqs[0].decoded[t]}, {1, seqs[1].decoded[t]}};
    const std::vector<float> got = lm.decode(b);
    const size_t vocab = got.size() / 2;
    for (size_t r = 0; r < 2; ++r)
      worst = std::max(worst, relative_error(std::span(got).subspan(r * vocab, vocab), seqs[r].alone[t + 1]));
  }
  std::printf("tiny batched f16: worst max|dlogit| / max|logit| %.2e\n", worst);
  EXPECT_LE(worst, 1e-2);
}

TEST_F(BatchedTinyLlama, BadSlotsTokensAndFullContextsAreRefusedByName) {
  BatchedLanguageModelOptions o{.context = 8, .slots = 2};
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), tiny_model(), o);
  using N = BatchedLanguageModel::Next;
  const int32_t one = 1;
  EXPECT_TRUE(fails_with([&] { lm.append(2, {&one, 1}); }, ErrorCode::invalid_argument, "slot 2 is outside [0, 2)"));
  EXPECT_TRUE(fails_with([&] { lm.append(-1, {&one, 1}); }, ErrorCode::invalid_argument, "slot -1 is outside [0, 2)"));
  EXPECT_TRUE(fails_with([&] { lm.append(0, {}); }, ErrorCode::invalid_argument, "no tokens"));
  EXPECT_TRUE(fails_with([&] { lm.decode(std::vector<N>{}); }, ErrorCode::invalid_argument, "0 sequences, expected 1 to 2"));
  EXPECT_TRUE(fails_with([&] { lm.decode(std::vector<N>{{0, 1}, {0, 2}}); }, ErrorCode::invalid_argument,
                         "slot 0 is listed twice (entries 0 and 1)"));
  EXPECT_TRUE(fails_with([&] { lm.decode(std::vector<N>{{0, 1}, {1, -5}}); }, ErrorCode::invalid_argument,
                         "token -5 at index 0 is outside the vocabulary"));
  EXPECT_TRUE(fails_with([&] { lm.decode(std::vector<N>{{0, 1}, {1, 2}, {0, 3}}); }, ErrorCode::invalid_argument,
                         "3 sequences, expected 1 to 2"));
  const std::vector<int32_t> eight(8, 1);
  lm.append(1, eight);
  EXPECT_EQ(lm.position(1), 8);
  EXPECT_TRUE(fails_with([&] { lm.decode(std::vector<N>{{0, 1}, {1, 2}}); }, ErrorCode::invalid_argument,
                         "1 tokens do not fit in the 0 positions left of slot 1's context (8, 8 used)"));
  EXPECT_EQ(lm.position(0), 0);  // a refused step moves no slot
  lm.reset(1);
  EXPECT_EQ(lm.position(1), 0);
  o.slots = 0;
  EXPECT_TRUE(fails_with([&] { BatchedLanguageModel::load(device(), tiny_model(), o); }, ErrorCode::invalid_argument,
                         "slots is 0, expected 1 to 256"));
}

// Steps that carry decoding tokens and chunks of prompts together (step(), the server's
// scheduler): six sequences in three slots with a budget of 24 tokens per step, prompts of 30
// (two steps), 5, 1, 50 (three), 17 and 9 tokens, so that prompt chunks of several slots share
// steps with decoding rows and buckets above the slots gather their logits rows.
TEST_F(BatchedTinyLlama, MixedStepsEqualTheSequenceAlone) {
  BatchedLanguageModelOptions o{.context = 96, .slots = 3, .step_tokens = 24};
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), tiny_model(), o);
  EXPECT_EQ(lm.step_rows(), 24);
  EXPECT_EQ(lm.step_bucket(3), 3);
  EXPECT_EQ(lm.step_bucket(4), 4);
  EXPECT_EQ(lm.step_bucket(9), 16);
  EXPECT_EQ(lm.step_bucket(17), 24);
  BatchedLanguageModelOptions wide = o;
  wide.step_tokens = 200;
  BatchedLanguageModel lw = BatchedLanguageModel::load(device(), tiny_model(), wide);
  EXPECT_EQ(lw.step_bucket(33), 48);
  EXPECT_EQ(lw.step_bucket(49), 64);
  EXPECT_EQ(lw.step_bucket(65), 128);
  EXPECT_EQ(lw.step_bucket(193), 200);
  LanguageModel alone = load_alone(device(), tiny_model(), o);
  const int64_t prompt_len[] = {30, 5, 1, 50, 17, 9};
  const int64_t decode_len[] = {6, 9, 4, 5, 7, 3};
  std::vector<Sequence> seqs = sequences_alone(alone, prompt_len, decode_len, 200, 210);
  int mixed = 0;
  std::set<int64_t> buckets;
  const double worst = run_mixed_schedule(lm, seqs, {0, 0, 0, 1, 2, 2}, 24, &mixed, &buckets);
  std::printf("tiny mixed steps: worst max|dlogit| / max|logit| %.2e, %d mixed steps, buckets:", worst, mixed);
  for (int64_t b : buckets) std::printf(" %lld", static_cast<long long>(b));
  std::printf("\n");
  EXPECT_GE(mixed, 3);
  EXPECT_TRUE(buckets.count(24) && buckets.count(16)) << "no step above the slots' rows";
}

// Prefix caching: a slot cut back to a prefix of its tokens (truncate) and continued with a new
// prompt sharing that prefix gives the logits of the new prompt alone; cut back to 0 it is empty.
TEST_F(BatchedTinyLlama, TruncatedSlotsContinueAsTheSequenceAlone) {
  BatchedLanguageModelOptions o{.context = 96, .slots = 2, .step_tokens = 32};
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), tiny_model(), o);
  LanguageModel alone = load_alone(device(), tiny_model(), o);
  const int64_t vocab = alone.config().vocab_size;
  const std::vector<int32_t> first = ids(40, vocab, 400), other = ids(12, vocab, 401), third = ids(20, vocab, 402);
  std::vector<int32_t> second(first.begin(), first.begin() + 25);  // shares 25 tokens with `first`
  second.insert(second.end(), other.begin(), other.end());
  alone.reset();
  const std::vector<float> want = alone.append(second);
  alone.reset();
  const std::vector<float> want_third = alone.append(third);

  using P = BatchedLanguageModel::Piece;
  lm.step(std::vector<P>{{0, std::span(first).first(20), false}, {1, std::span(third).first(12), false}});
  lm.step(std::vector<P>{{0, std::span(first).subspan(20), true}, {1, std::span(third).subspan(12), true}});
  EXPECT_EQ(lm.position(0), 40);
  EXPECT_TRUE(fails_with([&] { lm.truncate(0, 41); }, ErrorCode::invalid_argument, "length 41 is outside [0, 40]"));
  lm.truncate(0, 25);
  EXPECT_EQ(lm.position(0), 25);
  const std::vector<float> got = lm.step(std::vector<P>{{0, std::span(second).subspan(25), true}});
  const double err = relative_error(got, want);
  std::printf("tiny prefix reuse: max|dlogit| / max|logit| %.2e\n", err);
  EXPECT_LE(err, kTolerance);
  EXPECT_EQ(lm.position(0), static_cast<int64_t>(second.size()));
  lm.truncate(1, 0);  // slot 1 forgotten: a fresh prompt there is a sequence alone
  EXPECT_LE(relative_error(lm.step(std::vector<P>{{1, third, true}}), want_third), kTolerance);
}

TEST_F(BatchedTinyLlama, VerifiedPiecesAndRollbackEqualTheSequenceAlone) {
  BatchedLanguageModelOptions o;
  o.slots = 3;
  o.context = 96;
  o.step_tokens = 40;
  o.logit_rows = 12;
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), tiny_model(), o);
  EXPECT_EQ(lm.logit_rows(), 12);
  LanguageModelOptions lo;
  lo.context = 96;
  LanguageModel alone = LanguageModel::load(device(), tiny_model(), lo);
  const double worst = verify_and_roll_back(lm, alone);
  std::printf("tiny verification per slot: worst max|dlogit| / max|logit| %.2e\n", worst);
  // More logits rows than logit_rows: refused by name, no slot moved.
  using P = BatchedLanguageModel::Piece;
  const std::vector<int32_t> ten(10, 1), three(3, 1);
  const int64_t before = lm.position(0);
  EXPECT_TRUE(fails_with([&] { lm.step(std::vector<P>{{0, ten, false, true}, {1, three, false, true}}); },
                         ErrorCode::invalid_argument, "the logits of 13 rows wanted, more than the 12 a step returns"));
  EXPECT_EQ(lm.position(0), before);
  o.logit_rows = 41;
  EXPECT_TRUE(fails_with([&] { BatchedLanguageModel::load(device(), tiny_model(), o); }, ErrorCode::invalid_argument,
                         "logit_rows is 41, expected 0 or 3 (slots) to 40 (step_tokens)"));
}

TEST_F(BatchedTinyLlama, BadStepsAreRefusedByName) {
  BatchedLanguageModelOptions o{.context = 16, .slots = 2, .step_tokens = 8};
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), tiny_model(), o);
  using P = BatchedLanguageModel::Piece;
  const std::vector<int32_t> five(5, 1), ten(10, 1), bad{1, 1 << 30};
  EXPECT_TRUE(fails_with([&] { lm.step(std::vector<P>{}); }, ErrorCode::invalid_argument, "0 pieces, expected 1 to 2"));
  EXPECT_TRUE(fails_with([&] { lm.step(std::vector<P>{{0, five}, {1, five}}); }, ErrorCode::invalid_argument,
                         "10 tokens, more than the 8 a step carries"));
  EXPECT_TRUE(fails_with([&] { lm.step(std::vector<P>{{0, five}, {0, five}}); }, ErrorCode::invalid_argument,
                         "slot 0 is listed twice"));
  EXPECT_TRUE(fails_with([&] { lm.step(std::vector<P>{{1, {}}}); }, ErrorCode::invalid_argument,
                         "piece 0 (slot 1) has no tokens"));
  EXPECT_TRUE(fails_with([&] { lm.step(std::vector<P>{{0, bad}}); }, ErrorCode::invalid_argument,
                         "token 1073741824 at index 1 is outside the vocabulary"));
  EXPECT_TRUE(fails_with([&] { lm.step(std::vector<P>{{2, five}}); }, ErrorCode::invalid_argument,
                         "slot 2 is outside [0, 2)"));
  lm.step(std::vector<P>{{0, std::span(ten).first(8)}});
  lm.step(std::vector<P>{{0, std::span(ten).first(8)}});
  EXPECT_TRUE(fails_with([&] { lm.step(std::vector<P>{{1, five}, {0, five}}); }, ErrorCode::invalid_argument,
                         "5 tokens do not fit in the 0 positions left of slot 0's context (16, 16 used)"));
  EXPECT_EQ(lm.position(1), 0);  // a refused step moves no slot
  o.step_tokens = 1;
  EXPECT_TRUE(fails_with([&] { BatchedLanguageModel::load(device(), tiny_model(), o); }, ErrorCode::invalid_argument,
                         "step_tokens is 1, expected 0 or 2 (slots) to 4096"));
}

// SmolLM2-135M-Instruct (9 query heads over 3 KV heads, Q4_1): four sequences in four slots,
// joining at different steps, prompts of 3 to 80 tokens; steps of 1 to 4 rows.
class BatchedSmolLM2 : public DeviceTest {};

TEST_F(BatchedSmolLM2, EveryRowEqualsItsSequenceAlone) {
  ASSERT_TRUE(smollm2_gguf().error.empty()) << smollm2_gguf().error;
  BatchedLanguageModelOptions o{.context = 160, .slots = 4};
  BatchedLanguageModel lm = BatchedLanguageModel::load(test_device(), smollm2_gguf().path, o);
  LanguageModel alone = load_alone(test_device(), smollm2_gguf().path, o);
  const int64_t prompt_len[] = {12, 80, 3, 30};
  const int64_t decode_len[] = {6, 4, 5, 3};
  std::vector<Sequence> seqs = sequences_alone(alone, prompt_len, decode_len, 7, 70);
  std::map<int, int> rows;
  const double worst = run_schedule(lm, seqs, {0, 1, 1, 3}, &rows);
  std::printf("SmolLM2 batched: worst max|dlogit| / max|logit| %.2e; steps by rows:%s\n", worst, rows_text(rows).c_str());
  EXPECT_GT(rows[4], 0);
}

// A step of 240 prompt rows over slots of 1024 positions: q's rows times the cache's KV heads
// and positions (256 x 3 x 1088 x 64 floats) are more than one binding holds on lavapipe (128
// MiB), though the caches themselves, bound whole and read at each row's slot, are not. Two
// prompts of 120 tokens in one step give their logits alone.
TEST_F(BatchedSmolLM2, StepsOfManyRowsOverLongSlots) {
  ASSERT_TRUE(smollm2_gguf().error.empty()) << smollm2_gguf().error;
  BatchedLanguageModelOptions o{.context = 1024, .slots = 2, .step_tokens = 256};
  BatchedLanguageModel lm = BatchedLanguageModel::load(test_device(), smollm2_gguf().path, o);
  LanguageModel alone = load_alone(test_device(), smollm2_gguf().path, o);
  const int64_t vocab = alone.config().vocab_size;
  const std::vector<int32_t> a = ids(120, vocab, 90), b = ids(120, vocab, 91);
  std::vector<std::vector<float>> want;
  for (const auto* p : {&a, &b}) {
    alone.reset();
    want.push_back(alone.append(*p));
  }
  using P = BatchedLanguageModel::Piece;
  EXPECT_EQ(lm.step_bucket(240), 256);
  const std::vector<float> got = lm.step(std::vector<P>{{0, a, true}, {1, b, true}});
  ASSERT_EQ(got.size(), 2 * static_cast<size_t>(vocab));
  const double err = std::max(relative_error(std::span(got).first(static_cast<size_t>(vocab)), want[0]),
                              relative_error(std::span(got).subspan(static_cast<size_t>(vocab)), want[1]));
  std::printf("SmolLM2 step of 240 rows over slots of 1024: max|dlogit| / max|logit| %.2e\n", err);
  EXPECT_LE(err, kTolerance);
}

// ---- Families whose attention takes masks: soft-capping and sliding windows ----

// The tiny family models of tests/golden_families (width 32, 4 query heads of 8 dims over 2 KV
// heads, sliding windows of 6): Gemma 2 (soft-capped attention, sliding and global layers
// alternating), Gemma 3 (5 sliding layers to 1 global, local RoPE base), Mistral and Phi-3
// (a window on every layer). Sequences run far past the window, so each row of a step must see
// only the last 6 rows of its own slot (global layers: all of them), soft-capped for Gemma 2.
fs::path family_model(const std::string& family) {
  return fs::path(VKF_FAMILIES_GOLDEN_DIR) / (family + ".f32.gguf");
}

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

class BatchedFamilies : public DeviceTestWithParam<std::string> {};

// Five sequences in four slots as in BatchedTinyLlama.EveryRowEqualsItsSequenceAlone: prompts
// of 5, 70 (two chunks), 1, 17 and 3 tokens decoding 10 to 20 tokens each, so the window (6)
// cuts into every sequence at some step while the others are elsewhere; a paused slot and
// padded steps of 3 rows.
TEST_P(BatchedFamilies, EveryRowEqualsItsSequenceAlone) {
  const std::string family = GetParam();
  BatchedLanguageModelOptions o{.context = 96, .slots = 4};
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), family_model(family), o);
  ASSERT_GT(lm.config().sliding_window, 0) << family << ": the model has no sliding window";
  LanguageModel alone = load_alone(device(), family_model(family), o);
  const int64_t prompt_len[] = {5, 70, 1, 17, 3};
  const int64_t decode_len[] = {20, 12, 16, 10, 14};
  std::vector<Sequence> seqs = sequences_alone(alone, prompt_len, decode_len, 30, 300);
  std::map<int, int> rows;
  const double worst = run_schedule(lm, seqs, {0, 0, 1, 3, 12}, &rows, {.seq = 2, .from = 4, .to = 6});
  std::printf("%s batched: worst max|dlogit| / max|logit| %.2e; steps by rows:%s\n", family.c_str(), worst,
              rows_text(rows).c_str());
  EXPECT_GT(rows[4], 0);
  EXPECT_GT(rows[2], 0);
}

// Mixed steps in the families with masks: sliding windows and soft-capping per row when several
// rows of a step belong to one slot (window mask rows at each row's own position).
TEST_P(BatchedFamilies, MixedStepsEqualTheSequenceAlone) {
  const std::string family = GetParam();
  BatchedLanguageModelOptions o{.context = 96, .slots = 3, .step_tokens = 20};
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), family_model(family), o);
  LanguageModel alone = load_alone(device(), family_model(family), o);
  const int64_t prompt_len[] = {30, 5, 1, 45, 9};
  const int64_t decode_len[] = {12, 10, 8, 6, 9};
  std::vector<Sequence> seqs = sequences_alone(alone, prompt_len, decode_len, 500, 510);
  int mixed = 0;
  const double worst = run_mixed_schedule(lm, seqs, {0, 0, 0, 1, 3}, 20, &mixed, nullptr);
  std::printf("%s mixed steps: worst max|dlogit| / max|logit| %.2e, %d mixed steps\n", family.c_str(), worst, mixed);
  EXPECT_GE(mixed, 2);
}

// Greedy decoding: four sequences started together (prompts of 2 to 40 tokens), each taking its
// own argmax every step and leaving after 8 to 24 tokens, give the tokens each gives alone.
TEST_P(BatchedFamilies, GreedyTokensEqualTheSequenceAlone) {
  const std::string family = GetParam();
  BatchedLanguageModelOptions o{.context = 80, .slots = 4};
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), family_model(family), o);
  LanguageModel alone = load_alone(device(), family_model(family), o);
  const int64_t vocab = alone.config().vocab_size;
  const int64_t prompt_len[] = {2, 40, 9, 23};
  const size_t steps[] = {24, 8, 16, 20};
  std::vector<std::vector<int32_t>> prompts, want(4), got(4);
  for (size_t i = 0; i < 4; ++i) {
    prompts.push_back(ids(prompt_len[i], vocab, static_cast<uint32_t>(50 + i)));
    alone.reset();
    std::vector<float> logits = alone.append(prompts[i]);
    for (size_t t = 0; t < steps[i]; ++t) {
      want[i].push_back(argmax(logits));
      if (t + 1 < steps[i]) logits = alone.append({&want[i].back(), 1});
    }
  }
  std::vector<std::vector<float>> last(4);
  for (int i = 0; i < 4; ++i) {
    lm.reset(i);
    last[static_cast<size_t>(i)] = lm.append(i, prompts[static_cast<size_t>(i)]);
  }
  for (size_t t = 0;; ++t) {
    std::vector<BatchedLanguageModel::Next> batch;
    for (int i = 0; i < 4; ++i) {
      const size_t u = static_cast<size_t>(i);
      if (t >= steps[u]) continue;
      got[u].push_back(argmax(last[u]));
      if (t + 1 < steps[u]) batch.push_back({i, got[u].back()});
    }
    if (batch.empty()) break;
    const std::vector<float> out = lm.decode(batch);
    for (size_t r = 0; r < batch.size(); ++r)
      last[static_cast<size_t>(batch[r].slot)].assign(out.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                                                      out.begin() + static_cast<std::ptrdiff_t>((r + 1) * vocab));
  }
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[i]) << family << " sequence " << i;
  std::set<int32_t> distinct;
  for (const auto& w : want) distinct.insert(w.begin(), w.end());
  EXPECT_GT(distinct.size(), 4u) << "the continuations are too alike to tell rows apart";
}

// Speculative verification per slot where each row must see only its own window (6) of its own
// slot: verify_and_roll_back's 8-row piece spans more than a window.
TEST_P(BatchedFamilies, VerifiedPiecesAndRollbackEqualTheSequenceAlone) {
  const std::string family = GetParam();
  BatchedLanguageModelOptions o;
  o.slots = 3;
  o.context = 96;
  o.step_tokens = 40;
  o.logit_rows = 12;
  BatchedLanguageModel lm = BatchedLanguageModel::load(device(), family_model(family), o);
  LanguageModelOptions lo;
  lo.context = 96;
  LanguageModel alone = LanguageModel::load(device(), family_model(family), lo);
  const double worst = verify_and_roll_back(lm, alone);
  std::printf("%s verification per slot: worst max|dlogit| / max|logit| %.2e\n", family.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Windowed, BatchedFamilies, ::testing::Values("gemma2", "gemma3", "mistral", "phi3"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace vkformer::testing
