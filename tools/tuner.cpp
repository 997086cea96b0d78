#include "tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <new>

#include "cli.hpp"
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

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string ms(double us) { return fmt(us >= 100000 ? "%.0f ms" : "%.2f ms", us / 1000); }

// One candidate being timed: its own device (opened under a trial of its value) and one
// compiled graph per shape.
struct Live {
  CandidateResult result;
  std::unique_ptr<Device> device;
  std::vector<std::unique_ptr<Executor>> executors;  // per shape; null where it failed
  std::vector<std::vector<double>> times;             // per shape
  std::vector<double> warm_us;                        // per shape: the warm-up run
  bool ok() const { return result.error.empty(); }
};

double run_once(Executor& ex) {
  ex.run();
  return ex.last_gpu_microseconds();
}

class Sweep {
 public:
  Sweep(const TuneSettings& s, const std::function<void(const std::string&)>& say)
      : s_(s), say_(say), start_(Clock::now()) {}

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double left() const { return s_.budget_s - elapsed(); }

  TuneReport run() {
    TuneReport report;
    {
      vk::ScopedTuningTrial trial({});  // the static table, whatever the cache holds
      Device d = Device::open(s_.device);
      report.device = d.info();
    }
    if (!report.device.timestamps)
      throw Error(ErrorCode::unsupported, "vkformer tune: device '" + report.device.name +
                                              "' has no timestamp queries on its compute queue");
    const auto& all = vk::all_tunables();
    for (size_t i = 0; i < all.size(); ++i) {
      const vk::Tunable& t = all[i];
      if (!s_.only.empty() && std::find(s_.only.begin(), s_.only.end(), t.id) == s_.only.end())
        continue;
      TunableResult r = tune_one(report.device, t, "[" + std::to_string(i + 1) + "/" +
                                                       std::to_string(all.size()) + "] ");
      if (r.status == "not reached") report.budget_spent = true;
      if (r.measured()) winners_.emplace_back(r.id, r.winner);
      report.tunables.push_back(std::move(r));
    }
    report.took_s = elapsed();
    report.validation_messages = validation_messages_;
    return report;
  }

 private:
  TunableResult tune_one(const DeviceInfo& info, const vk::Tunable& t, const std::string& tag) {
    TunableResult r;
    r.id = t.id;
    auto skip = [&](const std::string& status, const std::string& note) {
      r.status = status;
      r.note = note;
      say_(tag + t.id + ": " + status + " (" + note + ")");
      return r;
    };
    if (vk::tunable_overridden(t)) return skip("skipped", t.env + " is set");
    std::vector<vk::TunableValue> candidates;
    {
      vk::ScopedTuningTrial trial(winners_);
      candidates = t.candidates(info, vk::tuning_for(info));
    }
    if (candidates.size() < 2) return skip("skipped", "does not apply to this device");
    std::vector<vk::TuneShape> shapes;
    for (const vk::TuneShape& s : s_.shapes)
      if (std::find(t.ops.begin(), t.ops.end(), s.op) != t.ops.end() && (!t.measures || t.measures(s)))
        shapes.push_back(s);
    if (shapes.empty()) return skip("skipped", "no shape of the set exercises it");
    // The static candidate and one more must fit: about twice the last tunable's cost.
    if (left() < std::max(1.0, 2 * last_candidate_s_)) return skip("not reached", "budget spent");

    say_(tag + t.id + ": " + std::to_string(candidates.size()) + " candidates x " +
         std::to_string(shapes.size()) + " shapes (" + t.description + ")");
    std::vector<Live> live;
    for (size_t c = 0; c < candidates.size(); ++c) {
      // Each further candidate needs about what the static one took (prepare + rounds).
      if (c > 0 && left() < live[0].result.prepare_s + round_s(live[0], shapes.size()) * (s_.rounds + 1)) {
        r.note = "budget spent after " + std::to_string(c) + " of " +
                 std::to_string(candidates.size()) + " candidates";
        break;
      }
      live.push_back(prepare(info, t, candidates[c], shapes, c == 0 ? nullptr : &live[0]));
      const Live& l = live.back();
      say_("  " + l.result.value + (c == 0 ? " (static)" : "") + ": " +
           (l.ok() ? "prepared in " + fmt("%.1f s", l.result.prepare_s) : l.result.error));
      if (c == 0 && !l.ok()) return skip("skipped", "the static choice failed: " + l.result.error);
      if (c == 0 && std::none_of(l.executors.begin(), l.executors.end(), [](auto& e) { return !!e; }))
        return skip("skipped", "the device runs none of its shapes");
    }
    for (const vk::TuneShape& s : shapes) r.shapes.push_back(s.text());

    // Interleaved rounds: every candidate once per shape in each, so each shares the machine's
    // moments (other processes, clocks) with the static choice.
    const double one_round = [&] {
      double s = 0;
      for (const Live& l : live) s += round_s(l, shapes.size());
      return s;
    }();
    for (int round = 0; round < s_.rounds; ++round) {
      if (round >= 2 && left() < one_round) break;
      for (Live& l : live) time_round(l);
      r.rounds = round + 1;
    }
    for (Live& l : live) summarize(l);

    // The best candidate that beats the static choice by the margin without losing any shape.
    const Live& base = live[0];
    int best = -1;
    for (size_t c = 1; c < live.size(); ++c)
      if (wins(live[c], base) && (best < 0 || live[c].result.total_us < live[best].result.total_us))
        best = static_cast<int>(c);
    for (const Live& l : live)
      if (l.ok())
        say_("    " + l.result.value + ": " + ms(l.result.total_us) +
             (&l == &base ? " (static)"
                          : fmt(" (%+.1f%%)", 100 * (l.result.total_us / base.result.total_us - 1))));
    r.static_us = base.result.total_us;
    r.winner = base.result.value;
    r.winner_us = r.static_us;
    r.status = "static";
    if (best < 0) {
      r.note = "no candidate beat it by " + fmt("%.0f%%", s_.margin * 100);
    } else if (!confirm(live[0], live[best], &r)) {
      r.note = live[best].result.value + " did not hold its lead in the confirmation";
    } else {
      r.status = "tuned";
      r.winner = live[best].result.value;
      r.note = fmt("%.1f%% faster than the static choice", 100 * (1 - r.winner_us / r.static_us));
    }
    say_("  -> " + r.winner + (r.status == "tuned" ? " (" : " kept (") + r.note + ")");
    for (Live& l : live) r.candidates.push_back(l.result);
    last_candidate_s_ = elapsed_in(live, shapes.size(), r.rounds);
    for (Live& l : live) {
      l.executors.clear();
      if (l.device) validation_messages_ += report_validation(*l.device);
    }
    return r;
  }

  // The confirmation: the static choice and the winner alone, alternating, with fresh samples.
  bool confirm(Live& base, Live& best, TunableResult* r) {
    for (Live* l : {&base, &best})
      for (auto& v : l->times) v.clear();
    const double pair_s = round_s(base, base.times.size()) + round_s(best, best.times.size());
    int rounds = 0;
    for (; rounds < s_.confirm_rounds; ++rounds) {
      if (rounds >= 3 && left() < pair_s) break;
      time_round(base);
      time_round(best);
    }
    summarize(base);
    summarize(best);
    r->static_us = base.result.total_us;
    r->winner_us = best.result.total_us;
    return wins(best, base);
  }

  bool wins(const Live& c, const Live& base) const {
    if (!c.ok()) return false;
    if (c.result.total_us > base.result.total_us * (1 - s_.margin)) return false;
    for (size_t i = 0; i < c.result.median_us.size(); ++i)
      if (c.result.median_us[i] > base.result.median_us[i] * (1 + s_.shape_tolerance)) return false;
    return true;
  }

  Live prepare(const DeviceInfo& info, const vk::Tunable& t, const vk::TunableValue& value,
               const std::vector<vk::TuneShape>& shapes, const Live* base) {
    Live l;
    l.result.value = value.text;
    const auto t0 = Clock::now();
    try {
      Choices trial = winners_;
      trial.emplace_back(t.id, value.text);
      {
        vk::ScopedTuningTrial scope(trial);
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
          // Warm-up, untimed: first touches of memory and caches.
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
  static double round_s(const Live& l, size_t shapes) {
    double s = 0;
    for (size_t i = 0; i < l.times.size() && i < shapes; ++i)
      s += (l.times[i].empty() ? l.warm_us[i] : median(l.times[i])) / 1e6;
    return s;
  }

  static double elapsed_in(const std::vector<Live>& live, size_t shapes, int rounds) {
    double s = 0;
    for (const Live& l : live) s += l.result.prepare_s + round_s(l, shapes) * rounds;
    return live.empty() ? 0 : s / live.size();
  }

  const TuneSettings& s_;
  const std::function<void(const std::string&)>& say_;
  Clock::time_point start_;
  Choices winners_;           // the tunables decided so far, applied under later ones
  double last_candidate_s_ = 0;  // what one candidate of the previous tunable took
  size_t validation_messages_ = 0;
};

}  // namespace

TuneReport run_tuner(const TuneSettings& settings,
                     const std::function<void(const std::string&)>& say) {
  return Sweep(settings, say).run();
}

std::vector<vk::TunedChoice> tuned_choices(const TuneReport& report) {
  std::vector<vk::TunedChoice> out;
  for (const TunableResult& r : report.tunables) {
    if (!r.measured()) continue;
    vk::TunedChoice c;
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
