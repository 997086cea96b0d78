// `vkformer bench --model FILE.gguf --spec ngram|draft [--model-draft D.gguf] --spec-prompt FILE
// ...`: speculative decoding against plain decoding, side by side in one run. For each prompt
// file (its text as a user message in the model's chat template, or as it is where the model
// has none), rounds alternate: a plain
// greedy generation of -n tokens, then a speculative one, -r times after one untimed warm-up
// round of each (graphs compiled, weights read in), so that a noisy machine slows both alike.
// Reports generation tokens/s of each (mean ± sample stddev over the rounds), their ratio, the
// share of proposals kept and the tokens per pass, and whether the greedy tokens were the same
// (they must be: a difference is an error, exit status 1).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io_util.hpp"
#include "llm_cli.hpp"
#include "sample_stats.hpp"
#include "version.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf_tokenizer.hpp"

namespace vkformer::cli {

namespace {

using json = nlohmann::ordered_json;


std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) usage_error("--spec-prompt " + path + ": cannot read the file");
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.empty()) usage_error("--spec-prompt " + path + ": the file is empty");
  return text;
}

}  // namespace

int bench_speculative(const std::string& model, LlmArgs args, const std::vector<std::string>& prompt_files,
                      int64_t n_gen, int repeats, const std::string& json_path, const GlobalOptions& globals) {
  return run_llm_command([&] {
    if (prompt_files.empty()) usage_error("--spec needs at least one --spec-prompt FILE with bench --model");
    if (n_gen < 1) usage_error("-n must be at least 1 with --spec, got " + std::to_string(n_gen));
    if (repeats < 1) usage_error("-r must be at least 1, got " + std::to_string(repeats));
    args.model = model;
    check_llm_args(args);
    check_speculative_args(args);
    std::vector<std::string> texts;
    for (const auto& f : prompt_files) texts.push_back(read_text(f));
    Device device = Device::open(globals.device_options());
    LanguageModel lm = load_llm(device, args);
    std::optional<LanguageModel> draft = load_draft(device, args, lm);
    // The model's chat template where it has one (a random-weight stand-in may not: its text as is).
    std::optional<ChatTemplate> chat;
    if (!args.chat_template.empty() || lm.chat_templates().has_file_template()) chat = chosen_chat_template(lm, args);
    TextGenerationOptions plain;
    plain.max_tokens = n_gen;
    TextGenerationOptions spec = plain;
    spec.speculative = args.speculative;
    spec.speculative.draft_model = draft ? &*draft : nullptr;
    const DeviceInfo& d = device.info();
    std::printf("vkformer bench: speculative decoding (%s%s, --draft-max %d) against plain greedy decoding, %s, "
                "-n %lld, %d rounds each, alternating, on %s (%s)\n",
                to_string(spec.speculative.mode), draft ? (" with " + args.model_draft).c_str() : "",
                spec.speculative.draft_max, model.c_str(), static_cast<long long>(n_gen), repeats, d.name.c_str(),
                d.driver_name.c_str());
    std::printf("| %-24s | %6s | %18s | %18s | %6s | %8s | %9s | %5s |\n", "prompt", "tokens", "plain t/s",
                "speculative t/s", "ratio", "accepted", "tok/pass", "same");
    std::printf("|--------------------------|--------|--------------------|--------------------|--------|----------|-----------|-------|\n");
    json rows = json::array();
    bool all_same = true;
    for (size_t p = 0; p < texts.size(); ++p) {
      const std::vector<int32_t> ids =
          chat ? lm.tokenizer().encode(chat->apply({{"user", texts[p]}}), !chat->writes_bos(), true)
               : lm.tokenizer().encode(texts[p], true, true);
      check_prompt_fits(lm, ids.size() + static_cast<size_t>(n_gen));
      std::vector<double> plain_tps, spec_tps;
      TextGenerationStats last_spec;
      bool same = true;
      int64_t generated = 0;
      for (int round = 0; round <= repeats; ++round) {  // round 0: the untimed warm-up
        lm.reset();
        const auto a = generate(lm, ids, plain);
        lm.reset();
        const auto b = generate(lm, ids, spec);
        same = same && a.tokens == b.tokens;
        generated = a.stats.generated_tokens;
        std::fprintf(stderr, "%s round %d%s: plain %.2f t/s, speculative %.2f t/s\n", prompt_files[p].c_str(), round,
                     round == 0 ? " (warm-up)" : "", a.stats.generation_tokens_per_second(),
                     b.stats.generation_tokens_per_second());
        if (round == 0) continue;
        plain_tps.push_back(a.stats.generation_tokens_per_second());
        spec_tps.push_back(b.stats.generation_tokens_per_second());
        last_spec = b.stats;
      }
      all_same = all_same && same;
      const double ratio = mean(spec_tps) / mean(plain_tps);
      const std::string name = std::filesystem::path(prompt_files[p]).filename().string();
      std::printf("| %-24s | %6lld | %8.2f ± %-7.2f | %8.2f ± %-7.2f | %5.2fx | %7.0f%% | %9.2f | %5s |\n", name.c_str(),
                  static_cast<long long>(generated), mean(plain_tps), sample_stddev(plain_tps), mean(spec_tps),
                  sample_stddev(spec_tps), ratio, 100 * last_spec.acceptance_rate(),
                  last_spec.passes ? static_cast<double>(last_spec.generated_tokens) / static_cast<double>(last_spec.passes) : 0.0,
                  same ? "yes" : "NO");
      std::fflush(stdout);
      rows.push_back({{"prompt", prompt_files[p]},
                      {"prompt_tokens", ids.size()},
                      {"generated_tokens", generated},
                      {"plain_ts", plain_tps},
                      {"speculative_ts", spec_tps},
                      {"plain_avg_ts", mean(plain_tps)},
                      {"speculative_avg_ts", mean(spec_tps)},
                      {"ratio", ratio},
                      {"drafted", last_spec.drafted_tokens},
                      {"accepted", last_spec.accepted_tokens},
                      {"passes", last_spec.passes},
                      {"same_tokens", same}});
    }
    if (!json_path.empty()) {
      json doc;
      doc["vkformer_version"] = VKFORMER_VERSION;
      doc["model"] = model;
      doc["draft_model"] = args.model_draft.empty() ? json(nullptr) : json(args.model_draft);
      doc["device"] = {{"name", d.name}, {"driver", d.driver_name}, {"driver_version", d.driver_version}};
      doc["mode"] = to_string(spec.speculative.mode);
      doc["draft_max"] = spec.speculative.draft_max;
      doc["draft_min"] = spec.speculative.draft_min;
      doc["draft_p_min"] = spec.speculative.draft_p_min;
      doc["n_gen"] = n_gen;
      doc["rounds"] = repeats;
      doc["timer"] = "generation seconds of generate() (TextGenerationStats), plain and speculative rounds alternating";
      doc["prompts"] = rows;
      const std::string text = doc.dump(2) + "\n";
      io::OutputFile f(json_path, "--json");
      f.write(text.data(), text.size());
      f.close();
    }
    if (!all_same) {
      std::fprintf(stderr, "vkformer bench: error: speculative greedy tokens differ from plain decoding's\n");
      return 1;
    }
    return report_validation(device) ? 1 : 0;
  });
}

}  // namespace vkformer::cli
