// `vkformer tune --verify`: the benchmarks of `vkformer bench --quick` (or a --filter), each on
// two devices in one process, one with the tuned choices of the cache and one with the static
// table, run alternately so that every pair meets the machine's same moment. The per-pair time
// ratios say whether the tuned choices cost anything. A third device, static too, runs in the same
// rotation as a control: its ratio to the first static one is the noise of that benchmark on this
// machine at that moment, so a benchmark counts as slower only beyond both the tolerance and the
// control.
#include "tune_verify.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <re2/re2.h>

#include "benchmarks.hpp"
#include "tuning_cache.hpp"
#include "vkformer/error.hpp"

namespace vkformer::cli {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double run_once(Executor& ex) {
  ex.run();
  return ex.last_gpu_microseconds();
}

}  // namespace

int verify_tuning(const DeviceOptions& options, const VerifyOptions& o) {
  Device tuned = Device::open(options);
  auto open_static = [&] {
    kernels::ScopedTuningTrial trial({});  // nothing tuned: the static table
    return Device::open(options);
  };
  Device stat = open_static(), control = open_static();
  const kernels::TuningCacheState state = kernels::tuning_cache_state(tuned.info());
  std::printf("vkformer tune --verify on %s: the tuned choices against the static table, "
              "benchmark by benchmark, runs alternating\n",
              tuned.info().name.c_str());
  if (state.status != kernels::TuningCacheState::Status::tuned) {
    std::printf("No tuned choices apply here (%s): both sides run the static table.\n",
                state.status == kernels::TuningCacheState::Status::ignored ? state.problem.c_str()
                : state.reason.empty() ? "no cache file"
                                       : state.reason.c_str());
  }
  size_t changed = 0;
  for (const kernels::TunedChoice& c : state.choices)
    if (c.value != c.static_value) {
      std::printf("  %s = %s (static %s)\n", c.tunable.c_str(), c.value.c_str(), c.static_value.c_str());
      ++changed;
    }
  if (changed == 0)
    std::printf("No tuned choice differs from the static table: both sides run the same kernels, "
                "and the table shows this machine's noise.\n");

  RE2 re(o.filter);
  if (!re.ok()) throw Error(ErrorCode::invalid_argument, "--filter: " + re.error());
  std::printf("\n| benchmark | static us | tuned us | tuned / static | control / static | pairs |\n"
              "|---|---|---|---|---|---|\n");
  int slower = 0;
  for (const bench::Benchmark& b : bench::all_benchmarks()) {
    if ((o.filter.empty() && !b.quick) || (!o.filter.empty() && !RE2::PartialMatch(b.id(), re)))
      continue;
    try {
      if (b.check) {
        b.check(stat);
        b.check(tuned);
      }
      bench::Prepared p[3] = {b.prepare(stat), b.prepare(tuned), b.prepare(control)};
      auto run = [](bench::Prepared& q) {
        if (q.before_each) q.before_each();
        return run_once(*q.executor);
      };
      for (auto& q : p) run(q);  // warm-up
      std::vector<double> times[3], tuned_ratio, control_ratio;
      const auto start = Clock::now();
      for (int i = 0; i < o.pairs; ++i) {
        if (i >= 3 && std::chrono::duration<double>(Clock::now() - start).count() > o.budget_s) break;
        // Rotate the order, so that no side always follows another.
        double t[3];
        for (int k = 0; k < 3; ++k) {
          const int side = (i + k) % 3;
          t[side] = run(p[side]);
        }
        for (int k = 0; k < 3; ++k) times[k].push_back(t[k]);
        tuned_ratio.push_back(t[1] / t[0]);
        control_ratio.push_back(t[2] / t[0]);
      }
      const double r = median(tuned_ratio), c = median(control_ratio);
      const bool worse = r > 1 + o.tolerance && r > c + o.tolerance;
      slower += worse;
      std::printf("| `%s` | %.1f | %.1f | %.3f%s | %.3f | %zu |\n", b.id().c_str(), median(times[0]),
                  median(times[1]), r, worse ? " (slower)" : "", c, tuned_ratio.size());
    } catch (const Error& e) {
      if (e.code() == ErrorCode::device_lost) throw;
      std::printf("| `%s` | - | - | skipped: %s | - | 0 |\n", b.id().c_str(), e.what());
    }
    std::fflush(stdout);
  }
  std::printf("\n%d benchmark%s slower with the tuned choices by more than %.0f%% (and than the "
              "static control)\n",
              slower, slower == 1 ? "" : "s", o.tolerance * 100);
  return slower && changed ? 1 : 0;
}

}  // namespace vkformer::cli
