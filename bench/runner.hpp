#pragma once
// How one benchmark is timed: prepare (data, compile: not timed), warm-up runs, then repeats
// until the count or the time budget is reached; GPU time of each run from the executor's
// timestamps; median, min and max; throughput and the fraction of the measured peak.
#include <functional>
#include <string>
#include <vector>

#include "benchmarks.hpp"
#include "peak.hpp"

namespace vkformer::bench {

struct RunOptions {
  int warmup = 3;
  int repeats = 10;
  // Wall-clock seconds of repeats per benchmark: repeating stops once they are spent (at least
  // one timed run is always made). Warm-up stops early after a quarter of it.
  double budget_s = 2.0;
  // Skip a benchmark whose one run would take longer than this: estimated as its roofline time
  // (FLOPs at the FMA peak, bytes at the copy peak, whichever is longer) divided by the share of
  // the roofline it is expected to reach (Efficiency). Keeps CPU devices from spending minutes on
  // GPU-sized problems.
  double max_run_s = 5.0;
};

// What share of the roofline a benchmark is expected to reach, to predict its run time: the
// share the last benchmark of the same family and variant reached on this device, else the
// benchmark's own expected_fraction, else 10%.
class Efficiency {
 public:
  static constexpr double kDefault = 0.1;
  double expected(const Benchmark& b, std::string* source) const;
  void observed(const Benchmark& b, double roofline_fraction);

 private:
  std::vector<std::pair<std::string, double>> seen_;  // "name/variant/dtype" -> fraction
};

struct Result {
  std::string status = "ok";  // "ok", "skipped" (the device cannot run it), "failed" (an error)
  std::string reason;         // for skipped and failed
  std::vector<double> times_us;  // GPU microseconds of each timed run
  double median_us = 0, min_us = 0, max_us = 0;
  double gflops = 0, gbps = 0;  // at the median
  double peak_fraction = 0;     // gflops / FMA peak (compute-bound) or gbps / copy peak (memory)
  double roofline_fraction = 0; // roofline time (both peaks) / median time
  double copy_same_size_gbps = 0;  // memory-bound: the copy kernel moving the same traffic
  double same_size_fraction = 0;   // memory-bound: gbps / copy_same_size_gbps
  int warmup_runs = 0;
  double prepare_s = 0;         // wall seconds to make data and compile (not in the timings)
  double predicted_s = 0;       // the run time predicted before running (see Efficiency)
  size_t dispatches = 0;        // compute dispatches in one run (fixed cost each, see README)
  size_t barriers = 0;          // pipeline barriers between them
};

// `stage` gets short progress texts ("preparing", "warm-up 1/3", "run 4/10").
Result run_benchmark(Device& device, const Benchmark& bench, const Peak& peak,
                     const RunOptions& options, Efficiency& efficiency,
                     const std::function<void(const std::string& stage)>& stage);

}  // namespace vkformer::bench
