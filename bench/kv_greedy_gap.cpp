// Where greedy text with one KV cache type parts from another's, and by how much the first type's
// top two logits stood apart there (issue 37: a q8_0 divergence from f16 is accepted when the f16
// run's top-2 gap at the first differing token is below 1e-3). Each type's model decodes the chat
// prompt greedily as `vkformer generate --chat -c CTX` does (one prompt pass, then one token a
// pass, argmax), and every step's top two logits are kept; prints one JSON object.
//
//   vkformer_kv_greedy_gap MODEL.gguf PROMPT [tokens 32] [ctx 512] [types f16 q8_0 ...]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "vkformer/chat.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/vkformer.hpp"

using namespace vkformer;

namespace {

struct Step {
  int32_t top1 = -1, top2 = -1;
  float logit1 = 0, logit2 = 0;
  std::string piece1, piece2;  // the tokens' text
  // Largest |logit - the first type's logit at this step| over the vocabulary; -1 after the runs
  // have parted (their inputs differ then).
  double max_abs_diff = -1;
};

Step top_two(const std::vector<float>& logits) {
  Step s;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (s.top1 < 0 || v > s.logit1) {
      s.top2 = s.top1, s.logit2 = s.logit1;
      s.top1 = static_cast<int32_t>(i), s.logit1 = v;
    } else if (s.top2 < 0 || v > s.logit2) {
      s.top2 = static_cast<int32_t>(i), s.logit2 = v;
    }
  }
  return s;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += static_cast<char>(c);
    else if (c == '\n') o += "\\n";
    else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
    else o += static_cast<char>(c);
  }
  return o + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT [tokens] [ctx] [types...]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1], prompt = argv[2];
  const int64_t n = argc > 3 ? std::atoll(argv[3]) : 32, ctx = argc > 4 ? std::atoll(argv[4]) : 512;
  std::vector<std::string> types;
  for (int i = 5; i < argc; ++i) types.push_back(argv[i]);
  if (types.empty()) types = {"f16", "q8_0"};
  try {
    Device device = Device::open();
    const ChatTemplate chat = ChatTemplate::load(path);
    std::vector<std::vector<Step>> runs;
    std::vector<std::vector<float>> first_logits;  // the first type's, per step
    std::vector<int32_t> ids;
    std::string text;
    for (const std::string& t : types) {
      LanguageModelOptions o;
      o.context = ctx;
      o.cache_type_k = o.cache_type_v = parse_kv_cache_type(t, "type");
      LanguageModel lm = LanguageModel::load(device, path, o);
      text = chat.apply({{"user", prompt}});
      ids = lm.tokenizer().encode(text, !chat.writes_bos(), true);
      std::vector<Step> steps;
      bool same_inputs = true;  // every token fed so far equals the first type's
      std::vector<float> logits = lm.append(ids);
      for (int64_t i = 0; i < n; ++i) {
        steps.push_back(top_two(logits));
        Step& s = steps.back();
        s.piece1 = lm.tokenizer().decode(std::vector<int32_t>{s.top1});
        s.piece2 = lm.tokenizer().decode(std::vector<int32_t>{s.top2});
        const size_t i_step = steps.size() - 1;
        if (runs.empty()) {
          first_logits.push_back(logits);
        } else if (i_step < first_logits.size() && same_inputs) {
          double m = 0;
          for (size_t v = 0; v < logits.size(); ++v)
            m = std::max(m, std::abs(static_cast<double>(logits[v]) - first_logits[i_step][v]));
          s.max_abs_diff = m;
        }
        const int32_t tok = steps.back().top1;
        if (!runs.empty() && (i_step >= runs[0].size() || runs[0][i_step].top1 != tok)) same_inputs = false;
        if (lm.tokenizer().is_end_of_generation(tok)) break;
        logits = lm.append(std::span<const int32_t>(&tok, 1));
      }
      runs.push_back(std::move(steps));
    }
    std::printf("{\"model\": %s, \"prompt\": %s, \"prompt_text\": %s, \"prompt_tokens\": %zu, \"ctx\": %lld, \"runs\": [\n",
                json_string(path).c_str(), json_string(prompt).c_str(), json_string(text).c_str(), ids.size(), static_cast<long long>(ctx));
    for (size_t r = 0; r < runs.size(); ++r) {
      // First step where this run's argmax differs from the first type's.
      long long first_diff = -1;
      for (size_t i = 0; i < runs[r].size() && i < runs[0].size(); ++i)
        if (runs[r][i].top1 != runs[0][i].top1) { first_diff = static_cast<long long>(i); break; }
      std::printf(" {\"type\": \"%s\", \"first_difference_from_%s\": %lld, \"steps\": [\n", types[r].c_str(),
                  types[0].c_str(), first_diff);
      for (size_t i = 0; i < runs[r].size(); ++i) {
        const Step& s = runs[r][i];
        std::printf("  {\"step\": %zu, \"top1\": %d, \"top1_piece\": %s, \"logit1\": %.6f, \"top2\": %d, "
                    "\"top2_piece\": %s, \"logit2\": %.6f, \"gap\": %.6f, \"max_abs_logit_diff_vs_first\": %.6f}%s\n",
                    i, s.top1, json_string(s.piece1).c_str(), s.logit1, s.top2, json_string(s.piece2).c_str(), s.logit2,
                    s.logit1 - s.logit2, s.max_abs_diff, i + 1 < runs[r].size() ? "," : "");
      }
      std::printf(" ]}%s\n", r + 1 < runs.size() ? "," : "");
    }
    std::printf("]}\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkformer_kv_greedy_gap: %s\n", e.what());
    return 1;
  }
  return 0;
}
