#include "runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <new>

#include "median.hpp"
#include "vkformer/error.hpp"

namespace vkformer::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double roofline_us(const Benchmark& b, const Peak& p) {
  double us = 0;
  if (p.fma_gflops > 0) us = std::max(us, b.flops / (p.fma_gflops * 1e3));
  if (p.copy_gbps > 0) us = std::max(us, b.bytes / (p.copy_gbps * 1e3));
  return us;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// "12 s", "1.5 s", "35 ms", "2e-09 s": as many digits as a reader needs.
std::string seconds(double s) {
  char buf[64];
  if (s >= 10) std::snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s >= 0.1) std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s >= 1e-4) std::snprintf(buf, sizeof buf, "%.2g ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.2g s", s);
  return buf;
}

std::string key_of(const Benchmark& b) {
  return b.name + "/" + b.variant + "/" + std::string(dtype_name(b.dtype));
}

}  // namespace

double Efficiency::expected(const Benchmark& b, std::string* source) const {
  const std::string key = key_of(b);
  for (auto it = seen_.rbegin(); it != seen_.rend(); ++it)
    if (it->first == key) {
      *source = "the " + fixed(it->second * 100, 1) + "% of roofline that the last " + key +
                " benchmark reached";
      return it->second;
    }
  if (b.expected_fraction > 0) {
    *source = "the " + fixed(b.expected_fraction * 100, 0) + "% of roofline expected of it";
    return b.expected_fraction;
  }
  *source = "an assumed " + fixed(kDefault * 100, 0) + "% of roofline";
  return kDefault;
}

void Efficiency::observed(const Benchmark& b, double fraction) {
  if (fraction > 0) seen_.emplace_back(key_of(b), fraction);
}

Result run_benchmark(Device& device, const Benchmark& b, const Peak& peak, const RunOptions& o,
                     Efficiency& efficiency,
                     const std::function<void(const std::string&)>& stage) {
  Result r;
  try {
    if (b.check) b.check(device);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unsupported) throw;
    r.status = "skipped";
    r.reason = e.what();
    return r;
  }
  std::string basis;
  const double expected = efficiency.expected(b, &basis);
  r.predicted_s = roofline_us(b, peak) / expected / 1e6;
  if (r.predicted_s > o.max_run_s) {
    r.status = "skipped";
    r.reason = "one run would take about " + seconds(r.predicted_s) + " here (" + basis +
               "), over --max-run-seconds " + seconds(o.max_run_s);
    return r;
  }
  try {
    stage("preparing");
    const auto t0 = Clock::now();
    Prepared p = b.prepare(device);
    r.prepare_s = seconds_since(t0);
    Executor& ex = *p.executor;
    r.dispatches = ex.stats().dispatches;
    r.barriers = ex.stats().barriers;
    auto run_once = [&] {
      if (p.before_each) p.before_each();
      ex.run();
      return ex.last_gpu_microseconds();
    };

    const auto warm = Clock::now();
    for (int i = 0; i < std::max(o.warmup, 1); ++i) {
      // One run at least: the first replay pays for first touches of memory and caches.
      if (i > 0 && seconds_since(warm) > o.budget_s / 4) break;
      stage("warm-up " + std::to_string(i + 1) + "/" + std::to_string(std::max(o.warmup, 1)));
      run_once();
      ++r.warmup_runs;
    }
    const auto timed = Clock::now();
    for (int i = 0; i < std::max(o.repeats, 1); ++i) {
      if (i > 0 && seconds_since(timed) > o.budget_s) break;
      stage("run " + std::to_string(i + 1) + "/" + std::to_string(std::max(o.repeats, 1)));
      r.times_us.push_back(run_once());
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::device_lost) throw;
    r.status = e.code() == ErrorCode::unsupported || e.code() == ErrorCode::out_of_memory
                   ? "skipped"
                   : "failed";
    r.reason = e.what();
    while (!r.reason.empty() && r.reason.back() == '\n') r.reason.pop_back();
    return r;
  } catch (const std::bad_alloc&) {
    r.status = "skipped";
    r.reason = "out of host memory";
    return r;
  }

  r.median_us = median(r.times_us);
  r.min_us = *std::min_element(r.times_us.begin(), r.times_us.end());
  r.max_us = *std::max_element(r.times_us.begin(), r.times_us.end());
  if (r.median_us > 0) {
    r.gflops = b.flops / (r.median_us * 1e3);
    r.gbps = b.bytes / (r.median_us * 1e3);
    const double peak_value = b.bound == Bound::compute ? peak.fma_gflops : peak.copy_gbps;
    const double value = b.bound == Bound::compute ? r.gflops : r.gbps;
    r.peak_fraction = peak_value > 0 ? value / peak_value : 0;
    r.roofline_fraction = roofline_us(b, peak) / r.median_us;
    efficiency.observed(b, r.roofline_fraction);
    // Memory-bound ops also against a copy of the same traffic (half read, half written), which
    // stays in a CPU's caches exactly when the op's data does.
    if (b.bound == Bound::memory && peak.copy_gbps > 0) {
      try {
        r.copy_same_size_gbps = copy_gbps_at(device, static_cast<uint64_t>(b.bytes / 2));
        r.same_size_fraction = r.copy_same_size_gbps > 0 ? r.gbps / r.copy_same_size_gbps : 0;
      } catch (const Error& e) {
        if (e.code() == ErrorCode::device_lost) throw;
      }
    }
  }
  return r;
}

}  // namespace vkformer::bench
