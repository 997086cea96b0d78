#include "tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <new>

#include "cli.hpp"
#include "format.hpp"
#include "tune_workloads.hpp"
#include "vkformer/error.hpp"
#include "vkformer/executor.hpp"

namespace vkformer::cli {

namespace {

using Clock = std::chrono::steady_clock;
using Choices = std::vector<std::pair<std::string, std::string>>;

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Half the interquartile range of `v`, relative to its median: how far a paired ratio wanders.
double spread(std::vector<double> v) {
  if (v.size() < 4) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return (v[(3 * n) / 4] - v[n / 4]) / 2;
}

std::string ms(double us) { return fmt(us >= 100000 ? "%.0f ms" : "%.2f ms", us / 1000); }

// One candidate being timed: its own device (opened under a trial of its value) and one
// compiled graph per shape.
struct Live {
  CandidateResult result;
  std::unique_ptr<Device> device;
  std::vector<std::unique_ptr<Executor>> executors;  // per shape; null where it does not run
  std::vector<std::vector<double>> times;             // per shape, one per round
  std::vector<double> warm_us;                        // per shape: the warm-up run
  bool ok() const { return result.error.empty(); }
};

double run_once(Executor& ex) {
  ex.run();
  return ex.last_gpu_microseconds();
}

// How a candidate compares with the static choice over rounds run side by side. Per shape: the
// median of the per-round time ratios (paired, so a slow moment of the machine cancels) and how
// much those ratios wander. Per round: the geometric mean of its ratios over the shapes (each
// shape counts the same). The candidate wins if the median round is at least `margin` faster,
// every round is faster but at most one of five or more (noise alone passes that about one time
// in 5 with 5 rounds, and the confirmation asks it again), and no shape is slower by more than
// max(tolerance, its wander).
struct Verdict {
  double score = 1;               // the median round's geometric-mean ratio
  int rounds = 0, slower_rounds = 0;
  bool slower_somewhere = false;
  std::string worst;              // the slower shape, for the report
  bool mostly_faster() const { return slower_rounds <= (rounds >= 5 ? 1 : 0); }
  bool wins(double margin) const {
    return score <= 1 - margin && mostly_faster() && !slower_somewhere;
  }
};

Verdict compare(const Live& c, const Live& base, double tolerance) {
  Verdict v;
  std::vector<double> log_rounds;
  for (size_t i = 0; i < c.times.size(); ++i) {
    if (!c.executors[i] || !base.executors[i]) continue;
    const size_t n = std::min(c.times[i].size(), base.times[i].size());
    if (log_rounds.size() < n) log_rounds.resize(n, 0.0);
    std::vector<double> ratios;
    for (size_t j = 0; j < n; ++j) {
      const double r = base.times[i][j] > 0 ? c.times[i][j] / base.times[i][j] : 1.0;
      ratios.push_back(r);
      log_rounds[j] += std::log(r);
    }
    if (ratios.empty()) continue;
    const double r = median(ratios);
    if (r > 1 + std::max(tolerance, spread(ratios))) {
      v.slower_somewhere = true;
      v.worst = fmt("%+.0f%%", 100 * (r - 1)) + " at shape " + std::to_string(i + 1);
    }
  }
  size_t shapes = 0;
  for (size_t i = 0; i < c.times.size(); ++i) shapes += c.executors[i] && base.executors[i];
  std::vector<double> rounds;
  for (double l : log_rounds) {
    const double g = std::exp(l / static_cast<double>(std::max<size_t>(shapes, 1)));
    rounds.push_back(g);
    v.slower_rounds += g >= 1;
  }
  v.rounds = static_cast<int>(rounds.size());
  if (!rounds.empty()) v.score = median(rounds);
  return v;
}

// The order of the sweep: cheapest first, so that the expensive tunables get what the cheap ones
// leave of the budget (each gets a fair share of what is left when its turn comes). The cost is a
// guess made before anything runs: a second per candidate to prepare, plus its shapes' work.
double guessed_cost(size_t candidates, const std::vector<kernels::TuneShape>& shapes) {
  double work = 0;
  for (const kernels::TuneShape& s : shapes) {
    switch (s.op) {
      case kernels::TuneOp::attention:
        work += 4.0 * double(s.batch * s.heads * s.m * s.n * s.head_dim);
        break;
      case kernels::TuneOp::softmax:
      case kernels::TuneOp::layer_norm:
      case kernels::TuneOp::rms_norm: work += 10.0 * double(s.m * s.n); break;
      default: work += 2.0 * double(s.m * s.n * s.k);
    }
  }
  return double(candidates) * (1.0 + work / 1e9);
}

class Sweep {
 public:
  Sweep(const TuneSettings& s, const std::function<void(const std::string&)>& say)
      : s_(s), say_(say), start_(Clock::now()), last_check_(start_) {}

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // Every decision to start more work asks this, so the time between two calls is one step that
  // nothing interrupts (a pipeline's JIT, a round of timings, releasing a device): the longest
  // such step bounds how far past its budget the sweep can run (report.longest_step_s).
  double left() {
    const auto now = Clock::now();
    longest_step_s_ = std::max(longest_step_s_, std::chrono::duration<double>(now - last_check_).count());
    last_check_ = now;
    return s_.budget_s - std::chrono::duration<double>(now - start_).count();
  }

  TuneReport run() {
    TuneReport report;
    kernels::Tuning base;
    {
      kernels::ScopedTuningTrial trial({});  // the static table, whatever the cache holds
      Device d = Device::open(s_.device);
      report.device = d.info();
      base = kernels::tuning_for(report.device);
    }
    if (!report.device.timestamps)
      throw Error(ErrorCode::unsupported, "vkformer tune: device '" + report.device.name +
                                              "' has no timestamp queries on its compute queue");
    // The tunables own disjoint fields of Tuning (tunables.hpp), so the order of the sweep
    // does not change any candidate list: cheapest first.
    const auto& all = kernels::all_tunables();
    std::vector<std::pair<double, size_t>> order;
    for (size_t i = 0; i < all.size(); ++i) {
      const kernels::Tunable& t = all[i];
      if (!s_.only.empty() && std::find(s_.only.begin(), s_.only.end(), t.id) == s_.only.end())
        continue;
      const size_t n = kernels::tunable_overridden(t) ? 0 : t.candidates(report.device, base).size();
      const auto shapes = shapes_for(t);
      order.emplace_back(n >= 2 && !shapes.empty() ? guessed_cost(n, shapes) : -1.0, i);
    }
    std::stable_sort(order.begin(), order.end());
    size_t pending = 0;
    for (auto& [cost, i] : order) pending += cost >= 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const auto [cost, i] = order[k];
      const double share = pending ? left() / static_cast<double>(pending) : left();
      TunableResult r = tune_one(report.device, all[i], share,
                                 "[" + std::to_string(k + 1) + "/" + std::to_string(order.size()) + "] ");
      if (cost >= 0) --pending;
      if (r.status == "not reached" || r.note.find("budget") != std::string::npos)
        report.budget_spent = true;
      if (r.measured()) winners_.emplace_back(r.id, r.winner);
      report.tunables.push_back(std::move(r));
    }
    // Reported in the registry's order, as the cache applies them.
    std::stable_sort(report.tunables.begin(), report.tunables.end(),
                     [&](const TunableResult& a, const TunableResult& b) {
                       return kernels::find_tunable(a.id) < kernels::find_tunable(b.id);
                     });
    left();  // the step since the last decision
    report.took_s = elapsed();
    report.longest_step_s = longest_step_s_;
    report.validation_messages = validation_messages_;
    return report;
  }

 private:
  std::vector<kernels::TuneShape> shapes_for(const kernels::Tunable& t) const {
    std::vector<kernels::TuneShape> shapes;
    for (const kernels::TuneShape& s : s_.shapes)
      if (std::find(t.ops.begin(), t.ops.end(), s.op) != t.ops.end() && (!t.measures || t.measures(s)))
        shapes.push_back(s);
    return shapes;
  }

  // Sweeps one tunable within `share` seconds (a little more when the static choice and one
  // candidate need it and the whole budget allows).
  TunableResult tune_one(const DeviceInfo& info, const kernels::Tunable& t, double share,
                         const std::string& tag) {
    TunableResult r;
    r.id = t.id;
    auto skip = [&](const std::string& status, const std::string& note) {
      r.status = status;
      r.note = note;
      say_(tag + t.id + ": " + status + " (" + note + ")");
      return r;
    };
    if (kernels::tunable_overridden(t)) return skip("skipped", t.env + " is set");
    std::vector<kernels::TunableValue> candidates;
    {
      kernels::ScopedTuningTrial trial(winners_);
      candidates = t.candidates(info, kernels::tuning_for(info));
    }
    if (candidates.size() < 2) return skip("skipped", "does not apply to this device");
    const std::vector<kernels::TuneShape> shapes = shapes_for(t);
    if (shapes.empty()) return skip("skipped", "no shape of the set exercises it");
    // The static choice and one candidate, at about what a candidate of the last tunable took.
    if (left() < std::max(1.0, 2 * last_candidate_s_)) return skip("not reached", "budget spent");

    const auto begun = Clock::now();
    auto used = [&] { return std::chrono::duration<double>(Clock::now() - begun).count(); };
    say_(tag + t.id + ": " + std::to_string(candidates.size()) + " candidates x " +
         std::to_string(shapes.size()) + " shapes, " + fmt("%.0f s", share) + " (" +
         t.description + ")");
    std::vector<Live> live;
    for (size_t c = 0; c < candidates.size(); ++c) {
      // What one more candidate costs: about what the static one did (prepare, kMinRounds), and
      // those rounds for every candidate already prepared.
      if (c >= 1) {
        const double next = live[0].result.prepare_s + kMinRounds * round_s(live[0]) * double(c + 1);
        if ((c >= 2 && used() + next > share) || left() < next) {
          r.note = "budget: " + std::to_string(c) + " of " + std::to_string(candidates.size()) +
                   " candidates; ";
          break;
        }
      }
      live.push_back(prepare(info, t, candidates[c], shapes, c == 0 ? nullptr : &live[0]));
      const Live& l = live.back();
      say_("  " + l.result.value + (c == 0 ? " (static)" : "") + ": " +
           (l.ok() ? "prepared in " + fmt("%.1f s", l.result.prepare_s) : l.result.error));
      if (c == 0 && !l.ok()) return skip("skipped", "the static choice failed: " + l.result.error);
      if (c == 0 && std::none_of(l.executors.begin(), l.executors.end(), [](auto& e) { return !!e; }))
        return skip("skipped", "the device runs none of its shapes");
    }
    for (const kernels::TuneShape& s : shapes) r.shapes.push_back(s.text());

    // Interleaved rounds: every candidate once per shape in each, so each shares the machine's
    // moments (other processes, clocks) with the static choice.
    double one_round = 0;
    for (const Live& l : live) one_round += round_s(l);
    for (int round = 0; round < s_.rounds; ++round) {
      // Nothing starts once the budget is spent, a first round included.
      if (left() < (round > 0 ? one_round : 0.0)) break;
      if (round >= kMinRounds && used() + one_round > share) break;
      for (Live& l : live) time_round(l);
      r.rounds = round + 1;
    }
    if (r.rounds == 0) {  // prepared, never timed: the static table stays, as if not reached
      release(live);
      return skip("not reached", r.note + "budget spent before a round was timed");
    }
    for (Live& l : live) summarize(l);

    // The candidate with the best score that beats the static choice by the margin without
    // losing at any shape.
    const Live& base = live[0];
    int best = -1;
    double best_score = 1;
    for (size_t c = 1; c < live.size(); ++c) {
      if (!live[c].ok()) continue;
      const Verdict v = compare(live[c], base, s_.shape_tolerance);
      say_("    " + live[c].result.value + ": " + fmt("%+.1f%%", 100 * (v.score - 1)) +
           (v.slower_somewhere ? " (slower " + v.worst + ")"
            : v.mostly_faster() ? ""
                                : " (slower in " + std::to_string(v.slower_rounds) + " of " +
                                      std::to_string(v.rounds) + " rounds)"));
      if (v.wins(s_.margin) && v.score < best_score) {
        best = static_cast<int>(c);
        best_score = v.score;
      }
    }
    say_("    static " + base.result.value + ": " + ms(base.result.total_us) + " a round");
    r.static_us = base.result.total_us;
    r.winner = base.result.value;
    r.winner_us = r.static_us;
    r.status = "static";
    if (best < 0) {
      r.note += "no candidate beat it by " + fmt("%.0f%%", s_.margin * 100) +
                " in nearly every round without losing at a shape";
    } else if (!confirm(live[0], live[static_cast<size_t>(best)], &r)) {
      r.note += live[static_cast<size_t>(best)].result.value +
                fmt(" (%+.1f%%) did not hold its lead when confirmed", 100 * (best_score - 1));
    } else {
      r.status = "tuned";
      r.winner = live[static_cast<size_t>(best)].result.value;
      r.note += fmt("%.1f%% faster (geometric mean over its shapes", 100 * (1 - r.score)) +
                fmt(", %.1f%% in the sweep)", 100 * (1 - best_score));
    }
    say_("  -> " + r.winner + (r.status == "tuned" ? " (" : " kept (") + r.note + ")");
    for (Live& l : live) r.candidates.push_back(l.result);
    last_candidate_s_ = used() / static_cast<double>(live.size());
    release(live);
    return r;
  }

  void release(std::vector<Live>& live) {
    for (Live& l : live) {
      l.executors.clear();
      if (l.device) validation_messages_ += report_validation(*l.device);
    }
  }

  // The static choice and the winner alone, alternating, with fresh samples: the winner must
  // keep the margin (so a lucky sweep does not make the cache).
  bool confirm(Live& base, Live& best, TunableResult* r) {
    for (Live* l : {&base, &best})
      for (auto& v : l->times) v.clear();
    const double pair_s = round_s(base) + round_s(best);
    int rounds = 0;
    for (; rounds < s_.confirm_rounds; ++rounds) {
      if (rounds >= kMinRounds && left() < pair_s) break;
      if (left() < (rounds > 0 ? pair_s : 0.0)) return false;  // no time to confirm: keep the static
      time_round(base);
      time_round(best);
    }
    summarize(base);
    summarize(best);
    const Verdict v = compare(best, base, s_.shape_tolerance);
    r->static_us = base.result.total_us;
    r->winner_us = best.result.total_us;
    r->score = v.score;
    return v.wins(s_.margin);
  }

  Live prepare(const DeviceInfo& info, const kernels::Tunable& t, const kernels::TunableValue& value,
               const std::vector<kernels::TuneShape>& shapes, const Live* base) {
    Live l;
    l.result.value = value.text;
    const auto t0 = Clock::now();
    try {
      Choices trial = winners_;
      trial.emplace_back(t.id, value.text);
      {
        kernels::ScopedTuningTrial scope(trial);
        l.device = std::make_unique<Device>(Device::open(s_.device));
      }
      if (l.device->info().uuid != info.uuid)
        throw Error(ErrorCode::device_not_found, "the device changed during tuning");
      for (size_t i = 0; i < shapes.size(); ++i) {
        // Shapes the static choice could not run are left out for every candidate.
        if (base && !base->executors[i]) {
          l.executors.push_back(nullptr);
          l.warm_us.push_back(0);
          continue;
        }
        try {
          l.executors.push_back(prepare_tune_shape(*l.device, shapes[i]));
          // Two untimed runs: the first touches memory and caches (and may compile lazily); the
          // second estimates a round for the budget.
          run_once(*l.executors.back());
          l.warm_us.push_back(run_once(*l.executors.back()));
        } catch (const Error& e) {
          if (e.code() != ErrorCode::unsupported || base) throw;
          l.executors.push_back(nullptr);
          l.warm_us.push_back(0);
        }
      }
      l.times.assign(shapes.size(), {});
    } catch (const Error& e) {
      if (e.code() == ErrorCode::device_lost) throw;
      l.result.error = std::string("failed: ") + e.what();
      l.executors.clear();
      l.device.reset();
    } catch (const std::bad_alloc&) {
      l.result.error = "failed: out of host memory";
      l.executors.clear();
      l.device.reset();
    }
    l.result.prepare_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return l;
  }

  void time_round(Live& l) {
    if (!l.ok()) return;
    for (size_t i = 0; i < l.executors.size(); ++i)
      if (l.executors[i]) l.times[i].push_back(run_once(*l.executors[i]));
  }

  void summarize(Live& l) {
    if (!l.ok()) return;
    l.result.median_us.clear();
    l.result.total_us = 0;
    for (size_t i = 0; i < l.times.size(); ++i) {
      const double m = l.executors[i] ? median(l.times[i]) : -1;
      l.result.median_us.push_back(m);
      if (m > 0) l.result.total_us += m;
    }
  }

  // Seconds one round of `l` takes (from its timings so far; its warm-up runs before those).
  static double round_s(const Live& l) {
    double s = 0;
    for (size_t i = 0; i < l.times.size(); ++i)
      s += (l.times[i].empty() ? l.warm_us[i] : median(l.times[i])) / 1e6;
    return s;
  }

  static constexpr int kMinRounds = 3;
  const TuneSettings& s_;
  const std::function<void(const std::string&)>& say_;
  Clock::time_point start_;
  Clock::time_point last_check_;  // the last call of left()
  double longest_step_s_ = 0;
  Choices winners_;  // the tunables decided so far, applied under later ones
  double last_candidate_s_ = 0;  // seconds per candidate of the last tunable swept
  size_t validation_messages_ = 0;
};

}  // namespace

TuneReport run_tuner(const TuneSettings& settings,
                     const std::function<void(const std::string&)>& say) {
  return Sweep(settings, say).run();
}

std::vector<kernels::TunedChoice> tuned_choices(const TuneReport& report) {
  std::vector<kernels::TunedChoice> out;
  for (const TunableResult& r : report.tunables) {
    if (!r.measured()) continue;
    kernels::TunedChoice c;
    c.tunable = r.id;
    c.value = r.winner;
    c.static_value = r.candidates.front().value;
    c.static_us = r.static_us;
    c.tuned_us = r.winner_us;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace vkformer::cli
