// Semantic search with sentence embeddings: the sentences of a corpus ranked by cosine
// similarity to a query, with a BERT-family model such as all-MiniLM-L6-v2
// (scripts/fetch_minilm.sh prints its directory).
//
//   semantic_search MODEL_DIR "query" [sentence ...]   (default: a small built-in corpus)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "vkformer/vkformer.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: semantic_search MODEL_DIR QUERY [SENTENCE ...]\n");
    return 2;
  }
  std::vector<std::string> corpus(argv + 3, argv + argc);
  if (corpus.empty())
    corpus = {"A man is eating food.", "A man is riding a horse.", "A woman is playing violin.",
              "A cheetah is running behind its prey.", "The stock market fell sharply."};
  try {
    vkformer::Device device = vkformer::Device::open();
    auto model = vkformer::SentenceEmbedder::load(device, argv[1]);
    std::vector<std::string> texts = corpus;
    texts.push_back(argv[2]);
    // One call for corpus and query; rows come back in order, L2-normalized when the model has a
    // Normalize module (then the dot product is the cosine).
    vkformer::HostTensor e = model.embed(texts);
    const std::vector<float> v = e.to_f32();
    const int64_t d = model.dimension();
    const float* query = &v[corpus.size() * d];
    std::vector<double> score(corpus.size());
    for (size_t i = 0; i < corpus.size(); ++i) {
      double dot = 0, a = 0, b = 0;
      for (int64_t j = 0; j < d; ++j)
        dot += double(v[i * d + j]) * query[j], a += double(v[i * d + j]) * v[i * d + j], b += double(query[j]) * query[j];
      score[i] = dot / std::sqrt(a * b);
    }
    std::vector<size_t> order(corpus.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return score[x] > score[y]; });
    std::printf("query: %s\n", argv[2]);
    for (size_t i : order) std::printf("  %.4f  %s\n", score[i], corpus[i].c_str());
  } catch (const vkformer::Error& e) {
    std::fprintf(stderr, "semantic_search: %s\n", e.what());
    return 1;
  }
  return 0;
}
