#include "bpe_merge.hpp"

#include <queue>

namespace vkformer::text::bpe {

namespace {

struct Symbol {
  size_t begin, size;  // bytes of the word
  int32_t id;          // -1: not a token (never merges)
  int prev, next;      // neighbours still alive; -1 at the ends
};

struct Candidate {
  int32_t rank;
  int left, right;
  size_t left_size, right_size;  // to notice a pair that changed since it was queued
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

size_t utf8_length(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

}  // namespace

void merge_word(std::string_view word, const TokenIndex& index, const MergeTable& merges,
                bool ignore_merges, std::vector<int32_t>& out, const int32_t* byte_tokens) {
  if (word.empty()) return;
  if (ignore_merges) {
    auto it = index.find(std::string(word));
    if (it != index.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> symbols;
  std::string scratch;
  for (size_t i = 0; i < word.size();) {
    size_t n = std::min(word.size() - i, utf8_length(static_cast<unsigned char>(word[i])));
    scratch.assign(word.substr(i, n));
    auto it = index.find(scratch);
    int k = static_cast<int>(symbols.size());
    symbols.push_back({i, n, it == index.end() ? -1 : it->second, k - 1, -1});
    if (k > 0) symbols[k - 1].next = k;
    i += n;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& a = symbols[left];
    const Symbol& b = symbols[right];
    if (a.id < 0 || b.id < 0) return;
    if (const MergeTable::Merge* m = merges.find(a.id, b.id))
      queue.push({m->rank, left, right, a.size, b.size});
  };
  for (int k = 1; k < static_cast<int>(symbols.size()); ++k) consider(k - 1, k);

  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& a = symbols[c.left];
    Symbol& b = symbols[c.right];
    // Stale: one side was merged away or grew since this pair was queued.
    if (a.size == 0 || b.size == 0 || a.next != c.right || a.size != c.left_size ||
        b.size != c.right_size)
      continue;
    a.id = merges.find(a.id, b.id)->merged;
    a.size += b.size;
    b.size = 0;
    a.next = b.next;
    if (b.next >= 0) symbols[b.next].prev = c.left;
    consider(a.prev, c.left);
    consider(c.left, a.next);
  }

  for (const Symbol& s : symbols) {
    if (s.size == 0) continue;
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    for (size_t i = 0; i < s.size; ++i) {
      if (byte_tokens) {
        int32_t id = byte_tokens[static_cast<unsigned char>(word[s.begin + i])];
        if (id >= 0) out.push_back(id);
        continue;
      }
      auto it = index.find(std::string(1, word[s.begin + i]));
      if (it != index.end()) out.push_back(it->second);
    }
  }
}

}  // namespace vkformer::text::bpe
