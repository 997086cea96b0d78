// A port of llama.cpp's llm_tokenizer_spm_session (MIT), kept step for step: the same queue
// order, the same staleness test and the same map from a merged text to the pair that made it
// last, so that ties and repeated texts resolve as there.
#include "spm_merge.hpp"

#include <map>
#include <queue>
#include <string>
#include <utility>

namespace vkformer::text::bpe {

namespace {

struct Symbol {
  int prev, next;
  const char* text;
  size_t n;
};

struct Bigram {
  int left, right;
  float score;
  size_t size;
};

// The highest score first; of equal scores the leftmost.
struct Lower {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

size_t utf8_length(unsigned char lead) {
  static const size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[lead >> 4];
}

class Session {
 public:
  Session(const BpeVocab& v, std::vector<int32_t>& out) : v_(v), out_(out) {}

  void tokenize(std::string_view text) {
    for (size_t offs = 0; offs < text.size();) {
      const int index = static_cast<int>(symbols_.size());
      Symbol sym;
      sym.text = text.data() + offs;
      sym.n = std::min(utf8_length(static_cast<unsigned char>(text[offs])), text.size() - offs);
      offs += sym.n;
      sym.prev = index - 1;
      sym.next = offs == text.size() ? -1 : index + 1;
      symbols_.push_back(sym);
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add_bigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram bigram = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[bigram.left];
      Symbol& right = symbols_[bigram.right];
      // One of them was merged since (it is empty, or the pair no longer spans this text).
      if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      try_add_bigram(left.prev, bigram.left);
      try_add_bigram(bigram.left, left.next);
    }

    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[i].next) resegment(symbols_[i]);
  }

 private:
  void resegment(const Symbol& symbol) {
    const std::string text(symbol.text, symbol.n);
    if (auto it = v_.index.find(text); it != v_.index.end()) {
      out_.push_back(it->second);
      return;
    }
    auto p = rev_merge_.find(text);
    if (p == rev_merge_.end()) {
      // No token: its bytes, each through the byte fallback (llama.cpp asserts there is one;
      // a vocabulary without one loses the byte).
      for (size_t j = 0; j < symbol.n; ++j) {
        int32_t id = v_.byte_token[static_cast<unsigned char>(symbol.text[j])];
        if (id >= 0) out_.push_back(id);
      }
      return;
    }
    resegment(symbols_[p->second.first]);
    resegment(symbols_[p->second.second]);
  }

  void try_add_bigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string text(symbols_[left].text, symbols_[left].n + symbols_[right].n);
    auto it = v_.index.find(text);
    if (it == v_.index.end()) return;
    queue_.push({left, right, v_.scores[static_cast<size_t>(it->second)], text.size()});
    rev_merge_[text] = {left, right};
  }

  const BpeVocab& v_;
  std::vector<int32_t>& out_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, Lower> queue_;
  std::map<std::string, std::pair<int, int>> rev_merge_;
};

}  // namespace

void spm_tokenize(std::string_view text, const BpeVocab& vocab, std::vector<int32_t>& out) {
  Session(vocab, out).tokenize(text);
}

}  // namespace vkformer::text::bpe
