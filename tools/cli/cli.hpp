#pragma once
// What every subcommand of the `vkformer` tool shares: the global options and how a command is
// registered. A command lives in its own cmd_<name>.cpp and is added in main.cpp.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/error.hpp"

namespace vkformer::cli {

// Options accepted before or after the subcommand name.
struct GlobalOptions {
  std::string device;            // --device SPEC; "" = VKFORMER_DEVICE, else the default order
  bool validation = false;       // --validation
  bool sync_validation = false;  // --sync-validation (implies --validation)

  InstanceOptions instance_options() const;
  DeviceOptions device_options() const;
};

// Prints the validation layer's messages since the last call to stderr and returns how many there
// were (none when validation is off). A command that opened a device ends with
// `return report_validation(device) ? 1 : 0;` so --validation can fail a run.
size_t report_validation(Device& device);

// Integer options parsed strictly: an optional '-' (only where lo < 0) and decimal digits, nothing
// else, within [lo, hi]; anything else is "expected a whole number from LO to HI, got 'TEXT'"
// (CLI11 alone saturated 9223372036854775808, wrapped 18446744073709551616 and took -1 for an
// unsigned option). Use as add_option(...)->check(whole_number_in(lo, hi)), or unsigned_number_in for
// uint64_t options.
CLI::Validator whole_number_in(int64_t lo, int64_t hi);
CLI::Validator unsigned_number_in(uint64_t lo, uint64_t hi);
// The same check on its own: "" when `text` is a whole number in range, else the message.
std::string check_whole_number(const std::string& text, int64_t lo, int64_t hi);
std::string check_unsigned_number(const std::string& text, uint64_t lo, uint64_t hi);

// The one exit-status rule, stated in `vkformer --help` and the README: 2 when the command line
// is wrong (an unknown command or option, a missing or out-of-range value, options that do not go
// together, a --model of a kind the command does not take, text that is not UTF-8 on the command
// line); 1 for anything that goes wrong while running (a file, a model, the device, input read
// from --file or stdin); 130 after Ctrl-C.
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;

// A mistake on the command line: main() prints it and exits with kExitUsage. The message names
// the option and what to do instead.
struct UsageError : Error {
  explicit UsageError(const std::string& message) : Error(ErrorCode::invalid_argument, message) {}
};
[[noreturn]] void usage_error(const std::string& message);

// Text must be UTF-8 everywhere the tool takes it. `where` names it ("--prompt", "line 3 of
// --file notes.txt", "stdin line 2"); the error says at which byte it breaks and how to convert.
// From the command line it is a UsageError, from a file or stdin an Error(invalid_argument).
void check_utf8(std::string_view text, const std::string& where, bool command_line);
// The same message without throwing: "" when the text is valid.
std::string utf8_problem(std::string_view text, const std::string& where);

// The closest of `candidates` to `given` when it is near enough to be a typo ("" otherwise):
// what "did you mean" offers.
std::string closest_match(const std::string& given, const std::vector<std::string>& candidates);

// A registered subcommand: its CLI11 node and what it does once the command line has parsed.
// `run` returns the exit status and reports failures by throwing vkformer::Error; main() turns
// those into "vkformer: error: <message>" and status 1 (2 for a UsageError).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// One per cmd_<name>.cpp. `globals` outlives the returned command.
Command add_devices_command(CLI::App& app, const GlobalOptions& globals);
Command add_run_command(CLI::App& app, const GlobalOptions& globals);
Command add_generate_command(CLI::App& app, const GlobalOptions& globals);
Command add_demo_command(CLI::App& app, const GlobalOptions& globals);
Command add_bench_command(CLI::App& app, const GlobalOptions& globals);  // cmd_bench.cpp, bench/
Command add_tune_command(CLI::App& app, const GlobalOptions& globals);   // cmd_tune.cpp, tuner.cpp

}  // namespace vkformer::cli
