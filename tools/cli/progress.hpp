#pragma once
// Progress of long work on stderr: a bar redrawn in place on a terminal, a plain line at every
// tenth otherwise (a log or a pipe stays readable). Used by `embed --file`, bench warm-ups and
// `perplexity`.
#include <chrono>
#include <cstdint>
#include <string>

namespace vkformer::cli {

class Progress {
 public:
  // `what` starts each line ("vkformer embed: texts"); nothing is shown for total <= min_total.
  Progress(std::string what, int64_t total, int64_t min_total = 0);
  void advance(int64_t n);
  void done();  // ends the bar's line on a terminal
  // Erases the bar on a terminal, so a line printed next starts clean; the next advance() draws
  // it again below that line.
  void clear();

 private:
  std::string what_;
  int64_t total_, done_ = 0;
  bool enabled_, tty_;
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace vkformer::cli
