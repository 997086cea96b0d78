// `vkformer demo --llm-model FILE.gguf`: a short greedy chat answer from SmolLM2-135M-Instruct
// (make demo fetches it with scripts/fetch_smollm2.sh), streamed as it is generated, with its
// tokens/s, and checked against the float64 reference's greedy answer to the same prompt
// (tests/golden_llama/manifest.json, case "chat").
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm_cli.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/error.hpp"

namespace vkformer::cli {

void llm_demo(Device& device, const std::string& gguf, const std::string& golden_dir) {
  const std::string question = "What is the capital of France?";
  std::printf("\n1b. A chat answer from SmolLM2-135M-Instruct (%s), greedy:\n", gguf.c_str());
  const auto t_load = std::chrono::steady_clock::now();
  LanguageModel lm = LanguageModel::load(device, gguf, {.context = 256});
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  // ChatML without SmolLM2's default system message: the prompt the reference answered.
  const std::string prompt = ChatTemplate::chatml().apply({{"user", question}});
  const std::vector<int32_t> ids = lm.tokenizer().encode(prompt);
  std::printf("  user: %s\n  assistant: ", question.c_str());
  std::fflush(stdout);
  TextGenerationOptions options;
  options.max_tokens = 24;  // greedy: the reference's answer
  const auto r = generate(lm, ids, options, [](std::string_view piece, int32_t) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::printf("\n  loaded in %.2f s; %s\n", load_s, describe_stats(r.stats).c_str());

  namespace fs = std::filesystem;
  const fs::path manifest = fs::path(golden_dir) / "manifest.json";
  std::ifstream in(manifest);
  if (!in) {
    std::printf("  (no %s: the answer is not compared with the reference)\n", manifest.string().c_str());
    return;
  }
  const auto golden = nlohmann::json::parse(in)["cases"]["chat"];
  std::vector<int32_t> want = golden["greedy"]["ids"].get<std::vector<int32_t>>();
  want.resize(golden["greedy"]["first_end_of_generation"].get<size_t>());
  if (golden["ids"].get<std::vector<int32_t>>() != ids)
    throw Error(ErrorCode::internal, "demo: the prompt's ids differ from the reference's (" + manifest.string() + ")");
  if (r.tokens != want)
    throw Error(ErrorCode::internal, "demo: the greedy answer differs from the float64 reference's: '" +
                                         lm.tokenizer().decode(want) + "'");
  std::printf("  %zu/%zu tokens identical to the float64 PyTorch reference's greedy answer\n", want.size(), want.size());
}

}  // namespace vkformer::cli
