#pragma once
// The sweep behind `vkformer tune`: for each tunable (src/kernels/tunables.hpp) in turn, every
// candidate on its own device handle (so each compiles its own pipelines), all of them timed in
// interleaved rounds at the same shapes, so that the static choice and the candidates share the
// machine's moments; a candidate wins only if it beats the static choice by the margin and is
// not slower at any shape, in those rounds and again in a confirmation of the two alone. Each
// tunable gets a fair share of the budget left when its turn comes.
#include <functional>
#include <string>
#include <vector>

#include "tunables.hpp"
#include "tuning_cache.hpp"
#include "vkformer/device.hpp"

namespace vkformer::cli {

struct TuneSettings {
  DeviceOptions device;
  std::vector<kernels::TuneShape> shapes;
  std::string shapes_label;  // "the bench --quick set" or the model file
  double budget_s = 120;     // wall-clock seconds for the whole sweep
  // A winner's per-shape time ratios to the static choice (medians of the rounds, paired) have a
  // geometric mean of at most 1 - margin, and none is above 1 + max(shape_tolerance, how much
  // that shape's ratios wander): in the sweep and again in the confirmation.
  double margin = 0.05;
  double shape_tolerance = 0.02;
  int rounds = 5;            // timed rounds at most (each runs every candidate once per shape)
  int confirm_rounds = 5;    // rounds of the static choice against the winner alone
  std::vector<std::string> only;  // tunable ids to sweep (empty: all)
};

struct CandidateResult {
  std::string value;
  std::vector<double> median_us;  // per shape of the tunable; < 0 where it failed
  double total_us = 0;            // sum of median_us (valid only if error is empty)
  double prepare_s = 0;
  std::string error;              // why it was left out
};

struct TunableResult {
  std::string id;
  std::string status;  // "tuned", "static", "skipped" or "not reached"
  std::string note;    // why, in a few words
  std::vector<std::string> shapes;
  std::vector<CandidateResult> candidates;  // [0] is the static choice
  std::string winner;                      // the value kept (the static one unless tuned)
  double static_us = 0, winner_us = 0;     // summed medians in the deciding rounds
  double score = 1;                        // the winner's ratio to the static choice (see margin)
  int rounds = 0;
  bool measured() const { return status == "tuned" || status == "static"; }
};

struct TuneReport {
  DeviceInfo device;
  std::vector<TunableResult> tunables;
  double took_s = 0;
  // The longest stretch between two of the sweep's budget checks: it stops at most about two of
  // these past its budget (the step in flight, then releasing the tunable's devices).
  double longest_step_s = 0;
  bool budget_spent = false;
  size_t validation_messages = 0;  // reported on stderr (with --validation)
};

// Runs the sweep; `say` gets each progress line (the caller prints them).
TuneReport run_tuner(const TuneSettings& settings, const std::function<void(const std::string&)>& say);

// The cache entries of a report: one per measured tunable.
std::vector<kernels::TunedChoice> tuned_choices(const TuneReport& report);

}  // namespace vkformer::cli
