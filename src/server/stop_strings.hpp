#pragma once
// OpenAI's `stop`: generation ends where one of the strings first appears, and the text returned
// ends before it. Text that might be the start of a stop string is held back until the next
// token shows whether it is, so a streamed reply never shows part of a stop string and equals
// the non-streamed one.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace vkformer::server {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds generated text; returns what can be shown now. stopped() tells whether a stop string
  // was found (the text after it is dropped).
  std::string push(const std::string& text) {
    held_ += text;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
    if (cut != std::string::npos) {
      stopped_ = true;
      std::string out = held_.substr(0, cut);
      held_.clear();
      return out;
    }
    size_t keep = 0;  // the longest end of held_ that begins a stop string
    for (const std::string& s : stops_)
      for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
        if (held_.compare(held_.size() - n, n, s, 0, n) == 0) { keep = n; break; }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  // At the end of generation: what was held back.
  std::string flush() { return std::exchange(held_, std::string()); }
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace vkformer::server
