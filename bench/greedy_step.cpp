// A decoded token's cost with greedy's choice made on the host (append(): the logits row read
// back, then Sampler's one pass) against on the device (append_greedy(): Graph::argmax, 16 bytes
// read back), in one process on one model: alternating rounds (the order flips each round) of
// `tokens` steps each, wall and CPU time per token, medians; the two choices must agree at every step.
// Issue 35 item 2; bench/RESULTS.md.
//
//   vkformer_greedy_step MODEL.gguf [rounds 6] [tokens 8] [ctx 512]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "median.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/sampling.hpp"
#include "vkformer/vkformer.hpp"

using namespace vkformer;
using vkformer::bench::median;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [rounds 6] [tokens 8] [ctx 512]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 6, tokens = argc > 3 ? std::atoi(argv[3]) : 8;
  const int64_t ctx = argc > 4 ? std::atoll(argv[4]) : 512;
  try {
    Device device = Device::open();
    LanguageModel lm = LanguageModel::load(device, argv[1], {.context = ctx});
    const std::vector<int32_t> prompt = lm.tokenizer().encode("The history of the river");
    // Both graphs compiled and warm before timing: the greedy copy compiles on its first call.
    lm.append(prompt);
    lm.rollback(static_cast<int64_t>(prompt.size()));
    lm.append_greedy(prompt);
    // Wall time per token, and the process's CPU time per token (std::clock: every thread's,
    // lavapipe's workers included, on Linux; the wall clock again on Windows).
    std::vector<double> host_ms, device_ms, host_cpu, device_cpu;
    std::vector<int32_t> first_round;  // the tokens chosen: every round must choose the same
    for (int r = 0; r < rounds; ++r)
      for (int k = 0; k < 2; ++k) {
        const bool on_device = (r + k) % 2 == 1;
        // The same steps each time: the prompt's cache, then `tokens` tokens decoded after it.
        lm.truncate(static_cast<int64_t>(prompt.size()));
        int32_t next = 0;
        std::vector<int32_t> chosen_tokens;
        const auto t0 = std::chrono::steady_clock::now();
        const std::clock_t c0 = std::clock();
        for (int i = 0; i < tokens; ++i) {
          int32_t chosen = 0;
          if (on_device) {
            chosen = lm.append_greedy(std::span<const int32_t>(&next, 1)).token;
          } else {
            Sampler greedy;
            chosen = greedy.sample(lm.append(std::span<const int32_t>(&next, 1)));
          }
          next = chosen;
          chosen_tokens.push_back(chosen);
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / tokens;
        const double cpu = 1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC / tokens;
        if (first_round.empty()) first_round = chosen_tokens;
        if (chosen_tokens != first_round) {
          std::fprintf(stderr, "vkformer_greedy_step: round %d (%s) chose other tokens than round 0\n", r,
                       on_device ? "device" : "host");
          return 1;
        }
        (on_device ? device_ms : host_ms).push_back(ms);
        (on_device ? device_cpu : host_cpu).push_back(cpu);
        std::fprintf(stderr, "round %d %s: %.2f ms/token, %.2f ms CPU (last token %d)\n", r,
                     on_device ? "device" : "host", ms, cpu, next);
      }
    std::printf("{\"model\": \"%s\", \"device\": \"%s\", \"rounds\": %d, \"tokens\": %d, "
                "\"host_ms_per_token\": %.2f, \"device_ms_per_token\": %.2f, \"host_cpu_ms_per_token\": %.2f, "
                "\"device_cpu_ms_per_token\": %.2f}\n",
                argv[1], device.info().name.c_str(), rounds, tokens, median(host_ms), median(device_ms),
                median(host_cpu), median(device_cpu));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkformer_greedy_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
