// What the sampler (vkformer/sampling.hpp) costs per token on the host, for SmolLM2's 49,152- and
// Gemma 3's 262,144-token vocabularies (issue 35: a decode step is ~50 ms on lavapipe but ~2 ms on
// a GPU, where the sampler must not dominate). Logits are synthetic: N(0, 2) with a dozen tokens
// 6-14 above ("peaked", like a model that knows what comes next) or without them ("flat"). Every
// option set is timed for distribution() and sample() (the draw; accept() is not called, so the
// repetition penalty's history stays the 64 tokens given); prints one JSON line per case with the
// median and the fastest call in microseconds of this thread's CPU time (what the call costs,
// less swayed by a busy machine than the wall clock) and the median wall time.
//
//   vkformer_sampler_speed [calls per case, 30]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <time.h>
#include <vector>

#include "vkformer/sampling.hpp"

using namespace vkformer;

namespace {

std::vector<float> make_logits(size_t n, bool peaked, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> l(n);
  for (float& v : l) v = normal(rng);
  if (peaked)
    for (int i = 0; i < 12; ++i) l[rng() % n] = 6.0f + static_cast<float>(i) * (8.0f / 11.0f);
  return l;
}

double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) * 1e-3;
}

struct Case {
  const char* name;
  SamplingOptions options;
};

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 30;
  if (calls < 1) {
    std::fprintf(stderr, "usage: vkformer_sampler_speed [calls per case >= 1]\n");
    return 2;
  }
  const Case cases[] = {
      {"greedy", {}},
      {"greedy+penalty", {.repeat_penalty = 1.1f}},
      {"temp1 (serve default)", {.temperature = 1.0f}},
      {"temp0.8+top_k40", {.temperature = 0.8f, .top_k = 40}},
      {"temp1+top_p0.95", {.temperature = 1.0f, .top_p = 0.95f}},
      {"temp1+min_p0.05", {.temperature = 1.0f, .min_p = 0.05f}},
      {"llama.cpp defaults (k40 p0.95 minp0.05 t0.8)",
       {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f}},
      {"temp1+top_p0.95+penalty", {.temperature = 1.0f, .top_p = 0.95f, .repeat_penalty = 1.1f}},
  };
  for (size_t vocab : {size_t{49152}, size_t{262144}}) {
    for (bool peaked : {true, false}) {
      for (const Case& c : cases) {
        for (const char* what : {"distribution", "sample"}) {
          Sampler s(c.options);
          std::vector<int32_t> history(64);
          for (size_t i = 0; i < history.size(); ++i) history[i] = static_cast<int32_t>((i * 7919) % vocab);
          s.accept(history);
          std::vector<double> us, wall;
          size_t sink = 0;
          for (int k = 0; k < calls; ++k) {
            const auto logits = make_logits(vocab, peaked, 1000 + static_cast<uint64_t>(k));
            const auto t0 = std::chrono::steady_clock::now();
            const double c0 = thread_cpu_us();
            if (what[0] == 'd') sink += s.distribution(logits).size();
            else sink += static_cast<size_t>(s.sample(logits));
            const double c1 = thread_cpu_us();
            const auto t1 = std::chrono::steady_clock::now();
            us.push_back(c1 - c0);
            wall.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
          }
          std::sort(us.begin(), us.end());
          std::sort(wall.begin(), wall.end());
          std::printf(
              "{\"vocab\": %zu, \"logits\": \"%s\", \"options\": \"%s\", \"call\": \"%s\", \"cpu_median_us\": %.1f, "
              "\"cpu_min_us\": %.1f, \"wall_median_us\": %.1f, \"calls\": %d, \"sink\": %zu}\n",
              vocab, peaked ? "peaked" : "flat", c.name, what, us[us.size() / 2], us.front(), wall[wall.size() / 2],
              calls, sink);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
