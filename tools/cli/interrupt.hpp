#pragma once
// Ctrl-C during generation: the first one stops at the next token, so the command can print the
// statistics so far and exit with status 130; outside an InterruptScope Ctrl-C ends the process
// as usual (a chat waiting on stdin, a model loading).
namespace vkformer::cli {

class InterruptScope {
 public:
  InterruptScope();   // catches SIGINT from here on
  ~InterruptScope();  // the previous handler again
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  // Whether Ctrl-C was pressed inside this scope; a token callback returns !interrupted().
  static bool interrupted();

 private:
  void (*previous_)(int);
};

}  // namespace vkformer::cli
