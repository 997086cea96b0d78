// Decoding at a filled KV cache and a prompt pass, with the cache in two types side by side in
// one process (issue 37's speed check: q8_0 K/V against f16). Both models load the same GGUF and
// read the same ids. First, rounds of one pass of `prompt` tokens from an empty cache; then each
// cache is filled on to `depth` tokens (once) and rounds time `gen` decoded tokens after
// truncating back to the depth. In every round the types take turns, the order alternating
// between rounds, so both see the same load on a shared machine; round 0 warms up (compiles the
// graphs) and is not counted. Prints a table and one JSON object (host wall clock, as
// `vkformer bench --model`).
//
//   vkformer_kv_cache_speed MODEL.gguf [depth 4096] [gen 8] [prompt 2048] [rounds 3] [types f16 q8_0 ...]
//
// Two or more types; a type ending in "/norot" loads its cache without the attention rotation
// (LanguageModelOptions::kv_rotation = false), to see what the rotation costs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "median.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/vkformer.hpp"

using namespace vkformer;
using vkformer::bench::median;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [depth] [gen] [prompt] [rounds] [type_a type_b ...]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int64_t depth = argc > 2 ? std::atoll(argv[2]) : 4096, gen = argc > 3 ? std::atoll(argv[3]) : 8;
  const int64_t prompt = argc > 4 ? std::atoll(argv[4]) : 2048;
  const int rounds = argc > 5 ? std::atoi(argv[5]) : 3;
  const std::vector<std::string> names = argc > 7 ? std::vector<std::string>(argv + 6, argv + argc)
                                                  : std::vector<std::string>{"f16", "q8_0"};
  try {
    Device device = Device::open();
    std::vector<LanguageModel> models;
    const int64_t context = std::max(depth + gen, prompt);
    for (const std::string& n : names) {
      LanguageModelOptions o;
      o.context = context;
      const std::string_view norot = "/norot";
      const bool rotation = !(n.size() > norot.size() && n.ends_with(norot));
      o.cache_type_k = o.cache_type_v =
          parse_kv_cache_type(rotation ? n : n.substr(0, n.size() - norot.size()), "type");
      o.kv_rotation = rotation;
      models.push_back(LanguageModel::load(device, path, o));
    }
    const int64_t vocab = models[0].config().vocab_size;
    std::vector<int32_t> ids(static_cast<size_t>(std::max(depth + gen, prompt)));
    uint64_t x = 42;
    for (auto& id : ids) {  // the same deterministic ids as bench --model's idea: an LCG
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      id = static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(vocab));
    }
    std::vector<std::vector<double>> decode_tps(names.size()), prompt_tps(names.size());
    auto order = [&](int r, size_t i) { return r % 2 == 0 ? i : models.size() - 1 - i; };
    for (int r = 0; r <= rounds; ++r)
      for (size_t i = 0; i < models.size(); ++i) {
        const size_t m = order(r, i);
        models[m].truncate(0);
        const auto t0 = Clock::now();
        models[m].append(std::span(ids).first(static_cast<size_t>(prompt)));
        const double p = static_cast<double>(prompt) / seconds_since(t0);
        if (r > 0) prompt_tps[m].push_back(p);
        std::fprintf(stderr, "round %d %s: prompt %lld %.2f t/s\n", r, names[m].c_str(), static_cast<long long>(prompt), p);
      }
    for (size_t m = 0; m < models.size(); ++m) {  // on from the prompt's rows to the depth
      models[m].truncate(std::min(prompt, depth));
      for (int64_t at = models[m].position(); at < depth; at += 512)
        models[m].append(std::span(ids).subspan(static_cast<size_t>(at), static_cast<size_t>(std::min<int64_t>(512, depth - at))));
    }
    for (int r = 0; r <= rounds; ++r)
      for (size_t i = 0; i < models.size(); ++i) {
        const size_t m = order(r, i);
        models[m].truncate(depth);
        const auto t0 = Clock::now();
        for (int64_t g = 0; g < gen; ++g) models[m].append(std::span(ids).subspan(static_cast<size_t>(depth + g), 1));
        const double d = static_cast<double>(gen) / seconds_since(t0);
        if (r > 0) decode_tps[m].push_back(d);
        std::fprintf(stderr, "round %d %s: decode at %lld %.2f t/s\n", r, names[m].c_str(), static_cast<long long>(depth), d);
      }
    std::printf("| cache | bytes per token | decode t/s at depth %lld (median) | prompt %lld t/s (median) |\n|---|---|---|---|\n",
                static_cast<long long>(depth), static_cast<long long>(prompt));
    for (size_t m = 0; m < models.size(); ++m)
      std::printf("| %s | %llu | %.2f | %.2f |\n", names[m].c_str(),
                  static_cast<unsigned long long>(models[m].kv_cache().bytes_per_token), median(decode_tps[m]),
                  median(prompt_tps[m]));
    std::printf("{\"device\": \"%s\", \"model\": \"%s\", \"depth\": %lld, \"gen\": %lld, \"prompt\": %lld, \"rounds\": %d, \"results\": [",
                device.info().name.c_str(), path.c_str(), static_cast<long long>(depth), static_cast<long long>(gen),
                static_cast<long long>(prompt), rounds);
    for (size_t m = 0; m < models.size(); ++m) {
      std::printf("%s{\"type\": \"%s\", \"bytes_per_token\": %llu, \"decode_tps\": [", m ? ", " : "", names[m].c_str(),
                  static_cast<unsigned long long>(models[m].kv_cache().bytes_per_token));
      for (size_t i = 0; i < decode_tps[m].size(); ++i) std::printf("%s%.4f", i ? ", " : "", decode_tps[m][i]);
      std::printf("], \"prompt_tps\": [");
      for (size_t i = 0; i < prompt_tps[m].size(); ++i) std::printf("%s%.4f", i ? ", " : "", prompt_tps[m][i]);
      std::printf("], \"decode_median\": %.4f, \"prompt_median\": %.4f}", median(decode_tps[m]), median(prompt_tps[m]));
    }
    std::printf("]}\n");
  } catch (const Error& e) {
    std::fprintf(stderr, "vkformer_kv_cache_speed: %s\n", e.what());
    return 1;
  }
  return 0;
}
