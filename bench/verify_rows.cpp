// What a speculative verification pass of m tokens costs against a decoded token (issue 38): on
// a device whose decoding is bound by reading the weights, the rows after the first should come
// nearly free. Two parts, in one process on one model:
//   1. LanguageModel::verify of m = 1, 2, 3, 5, 9 tokens (m = 1 is the decode graph), each pass
//      rolled back so every pass runs at the same position: alternating rounds (the order of the
//      m's rotates each round), `passes` passes per m and round, wall and CPU ms per pass, medians.
//   2. Where each graph's time goes: the decode graph and the verification graphs of 2, 4, 8 and
//      16 rows (verify_graph_rows) compiled with GPU timestamps around every op, their op times
//      summed by kernel variant ("matmul_wq_rows_q4_1_f32"), the mean of `passes` runs.
// bench/RESULTS.md, "Verification passes by rows".
//
//   vkformer_verify_rows MODEL.gguf [rounds 5] [passes 4] [ctx 512]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "median.hpp"
#include "llm/forward.hpp"
#include "llm/loaded_model.hpp"
#include "vkformer/executor.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/vkformer.hpp"

using namespace vkformer;
using vkformer::bench::median;
using namespace vkformer::models::llm;

namespace {

HostTensor scalar_i32(int64_t v) {
  return HostTensor::from_i32({1}, std::vector<int32_t>{static_cast<int32_t>(v)});
}

// Part 2: one graph of `rows` rows at `position`, profiled; op times by kernel variant (us per
// pass, the mean of `passes` runs after a warm-up run).
std::map<std::string, double> profile_graph(Device& device, const LoadedModel& m, int64_t rows, int64_t position,
                                            int passes) {
  const Logits logits = rows == 1 ? Logits::last : Logits::all;
  Graph g = build_forward(m.config, m.weights, m.caches, rows, logits, DType::f32);
  Executor e(device, g, {.profile = true});
  e.set_input("tokens", HostTensor::from_i32({1, rows}, std::vector<int32_t>(static_cast<size_t>(rows), 1)));
  if (needs_mask(m.config, rows)) e.set_input("mask", causal_mask(rows, m.cache_rows, position));
  if (needs_window_mask(m.config))
    e.set_input("window_mask", causal_mask(rows, m.cache_rows, position, m.config.sliding_window));
  e.set_input("position", scalar_i32(position));
  e.set_input("key_length", scalar_i32(position + rows));
  std::map<std::string, double> by_kernel;
  e.run();  // warm-up
  for (int r = 0; r < passes; ++r) {
    e.run();
    for (const OpTime& t : e.profile()) by_kernel[t.kernels] += t.microseconds / passes;
  }
  return by_kernel;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [rounds 5] [passes 4] [ctx 512]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5, passes = argc > 3 ? std::atoi(argv[3]) : 4;
  const int64_t ctx = argc > 4 ? std::atoll(argv[4]) : 512;
  const std::vector<int64_t> sizes = {1, 2, 3, 5, 9};
  try {
    Device device = Device::open();
    LanguageModel lm = LanguageModel::load(device, argv[1], {.context = ctx});
    const std::vector<int32_t> prompt =
        lm.tokenizer().encode("The history of the river begins in the mountains, where snow");
    const int64_t at = static_cast<int64_t>(prompt.size());
    const std::vector<int32_t> next = lm.tokenizer().encode(" melts every spring and runs down to the sea");
    lm.append(prompt);
    // Every graph compiled and warm before timing.
    for (int64_t m : sizes) {
      lm.verify(std::span(next).first(static_cast<size_t>(m)));
      lm.rollback(m);
    }

    std::map<int64_t, std::vector<double>> wall, cpu;
    for (int r = 0; r < rounds; ++r)
      for (size_t i = 0; i < sizes.size(); ++i) {
        const int64_t m = sizes[(i + static_cast<size_t>(r)) % sizes.size()];
        const auto tokens = std::span(next).first(static_cast<size_t>(m));
        const auto t0 = std::chrono::steady_clock::now();
        const std::clock_t c0 = std::clock();
        for (int k = 0; k < passes; ++k) {
          lm.verify(tokens);
          lm.rollback(m);
        }
        wall[m].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                          passes);
        cpu[m].push_back(1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC / passes);
      }
    std::printf("## %s on %s: LanguageModel::verify by tokens (%d rounds x %d passes, medians)\n\n", argv[1],
                device.info().name.c_str(), rounds, passes);
    std::printf("| tokens | graph rows | wall ms | x decode | CPU ms | x decode |\n|---|---|---|---|---|---|\n");
    const double w1 = median(wall[1]), c1 = median(cpu[1]);
    for (int64_t m : sizes)
      std::printf("| %lld | %lld | %.1f | %.2f | %.1f | %.2f |\n", static_cast<long long>(m),
                  static_cast<long long>(LanguageModel::verify_graph_rows(m)), median(wall[m]), median(wall[m]) / w1,
                  median(cpu[m]), median(cpu[m]) / c1);

    // Part 2, on a second copy of the model (the graphs' own caches; the first model's stay as
    // they are).
    LoadedModel m = load_model(device, argv[1], {.context = ctx}, "vkformer_verify_rows");
    const std::vector<int64_t> graph_rows = {1, 2, 4, 8, 16};
    std::map<int64_t, std::map<std::string, double>> profiles;
    std::map<std::string, double> order;  // kernels by their time in the largest graph
    for (int64_t rows : graph_rows) profiles[rows] = profile_graph(device, m, rows, at, passes);
    std::printf("\n## GPU time by kernel (profiled: ops serialized), us per pass\n\n| kernel |");
    for (int64_t rows : graph_rows) std::printf(" %lld rows |", static_cast<long long>(rows));
    std::printf("\n|---|");
    for (size_t i = 0; i < graph_rows.size(); ++i) std::printf("---|");
    std::printf("\n");
    std::map<std::string, bool> seen;
    std::vector<std::pair<double, std::string>> kernels;
    for (auto& [rows, p] : profiles)
      for (auto& [k, us] : p)
        if (!seen[k]) seen[k] = true, kernels.push_back({-profiles[graph_rows.back()][k], k});
    std::sort(kernels.begin(), kernels.end());
    std::map<int64_t, double> total;
    for (auto& [neg, k] : kernels) {
      std::printf("| %s |", k.c_str());
      for (int64_t rows : graph_rows) {
        const double us = profiles[rows].count(k) ? profiles[rows][k] : 0.0;
        total[rows] += us;
        std::printf(" %.0f |", us);
      }
      std::printf("\n");
    }
    std::printf("| total |");
    for (int64_t rows : graph_rows) std::printf(" %.0f |", total[rows]);
    std::printf("\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkformer_verify_rows: %s\n", e.what());
    return 1;
  }
  return 0;
}
