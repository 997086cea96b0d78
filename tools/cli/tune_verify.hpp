#pragma once
// `vkformer tune --verify` (tune_verify.cpp): the tuned choices against the static table at the
// benchmarks of `vkformer bench --quick`, side by side in one process.
#include <string>

#include "vkformer/device.hpp"

namespace vkformer::cli {

struct VerifyOptions {
  std::string filter;       // bench ids (RE2, searched); empty: the --quick set
  int pairs = 15;           // alternating runs of each side, at most
  double budget_s = 2.0;    // seconds of pairs per benchmark (at least 3 pairs)
  double tolerance = 0.05;  // "slower": the median pair ratio above 1 + this
};

// Prints the table; returns 1 when a benchmark is slower with the tuned choices (never when no
// tuned choice differs from the static table: then both sides are the same kernels).
int verify_tuning(const DeviceOptions& options, const VerifyOptions& o);

}  // namespace vkformer::cli
