#pragma once
// The device's attainable peaks, measured rather than looked up: an FMA-bound kernel
// (shaders/peak_fma.comp) for fp32 GFLOP/s and a copy kernel (shaders/peak_copy.comp) for GB/s.
// Each tries a few configurations (accumulator count, workgroup size, unroll, grid) and keeps the
// best time of a few repeats, timed with GPU timestamps; the FMA configurations run twice over.
// Every op result is a fraction of these.
#include <string>
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::bench {

struct PeakTrial {
  std::string config;  // "acc=8 wg=64 groups=4096 iterations=64"
  double microseconds = 0;  // best of the repeats
  double value = 0;         // GFLOP/s or GB/s
};

struct Peak {
  double fma_gflops = 0;    // best fp32 FMA throughput (1 fma = 2 FLOPs)
  double copy_gbps = 0;     // best copy bandwidth (bytes read + bytes written)
  uint64_t copy_bytes = 0;  // size of the source buffer the copy probe streams
  std::vector<PeakTrial> fma, copy;
  std::string error;        // why a probe could not run (then its peak is 0)
};

struct PeakOptions {
  bool quick = false;    // fewer configurations, one pass, a smaller copy buffer
  int repeats = 5;       // per configuration, after calibration
  double target_ms = 20; // the FMA probe scales its loop until one run takes about this long
};

Peak measure_peak(Device& device, const PeakOptions& options);

// The copy kernel's best bandwidth (bytes read + written per second / 1e9) when it copies
// `bytes`: the like-for-like reference of a memory-bound op with that much traffic. A small
// working set stays in a CPU's caches and copies faster than the DRAM-sized peak probe.
double copy_gbps_at(Device& device, uint64_t bytes, int repeats = 3);

}  // namespace vkformer::bench
