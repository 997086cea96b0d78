// The `vkformer` command-line tool: global options, the subcommands, and one place that turns
// every failure into "vkformer: error: <message>" and an exit status.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli.hpp"
#include "terminal.hpp"
#include "vkformer/error.hpp"

#ifndef VKFORMER_VERSION
#define VKFORMER_VERSION "unknown"
#endif

namespace vkformer::cli {

// Sentence embeddings and the tokenizer alone (cmd_embed.cpp, cmd_tokenize.cpp).
Command add_embed_command(CLI::App& app, const GlobalOptions& globals);
Command add_tokenize_command(CLI::App& app, const GlobalOptions& globals);
// A conversation with a GGUF language model (cmd_chat.cpp).
Command add_chat_command(CLI::App& app, const GlobalOptions& globals);
// A language model's perplexity on a text, as llama-perplexity measures it (cmd_perplexity.cpp).
Command add_perplexity_command(CLI::App& app, const GlobalOptions& globals);
// The OpenAI-compatible HTTP server (cmd_serve.cpp, src/server/).
Command add_serve_command(CLI::App& app, const GlobalOptions& globals);

namespace {

const char* const kFooter = R"(Environment:
  VKFORMER_DEVICE=SPEC          the device when --device is not given (index, name substring
                                or UUID)
  VKFORMER_VALIDATION=1         same as --validation
  VKFORMER_SYNC_VALIDATION=1    same as --sync-validation

Exit status: 0 on success; 2 when the command line is wrong (an unknown command or
option, a missing or out-of-range value, options that do not go together, a --model
the command does not take); 1 when anything else fails (a file, a model, the device,
input from --file or stdin); 130 after Ctrl-C.
Run 'vkformer <command> --help' for a command's own options.)";

void print_error(std::string message) {
  // Library messages may end with a listing that ends in a newline.
  while (!message.empty() && message.back() == '\n') message.pop_back();
  std::fprintf(stderr, "vkformer: error: %s\n", message.c_str());
}

// Every option name of a command and the global ones, with their dashes: what "did you mean"
// chooses from.
std::vector<std::string> option_names(const CLI::App* sub, const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* a : {sub, &app}) {
    if (!a) continue;
    for (const CLI::Option* o : a->get_options()) {
      for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
      for (const std::string& n : o->get_snames()) names.push_back("-" + n);
    }
  }
  return names;
}

// A parse error as a person can act on it: what was wrong, the likely intended word, and the
// help that lists the right ones (the command's own, once a command was named).
void explain_parse_error(const CLI::ParseError& e, CLI::App& app) {
  std::vector<std::string> commands;
  for (const CLI::App* c : app.get_subcommands({})) commands.push_back(c->get_name());
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  const CLI::App* sub = chosen.empty() ? nullptr : chosen[0];
  const std::string help = sub ? "vkformer " + sub->get_name() + " --help" : "vkformer --help";
  std::vector<std::string> rest = app.remaining();
  if (sub)
    for (const std::string& r : sub->remaining()) rest.push_back(r);
  const bool no_command = dynamic_cast<const CLI::RequiredError*>(&e) && !sub;
  // A misspelt option often surfaces as another error ("--model is required" for --modle): the
  // unknown word is the one to report.
  const std::vector<std::string> known = option_names(sub, app);
  const auto unknown = std::find_if(rest.begin(), rest.end(), [&](const std::string& w) {
    return w.starts_with("-") && w.size() > 1 &&
           std::find(known.begin(), known.end(), w.substr(0, w.find('='))) == known.end();
  });
  if (unknown != rest.end()) std::rotate(rest.begin(), unknown, unknown + 1);
  const bool extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr || unknown != rest.end();
  auto suggestion = [](const std::string& near) { return near.empty() ? "" : "; did you mean '" + near + "'?"; };
  if (no_command && !rest.empty() && !rest[0].starts_with("-")) {
    print_error("unknown command '" + rest[0] + "'" + suggestion(closest_match(rest[0], commands)));
  } else if (no_command && rest.empty()) {
    print_error("no command given");
  } else if (extras && !rest.empty()) {
    const std::string& word = rest[0];
    const std::string where = sub ? " for 'vkformer " + sub->get_name() + "'" : "";
    if (word.starts_with("-"))
      print_error("unknown option '" + word + "'" + where +
                  suggestion(closest_match(word.substr(0, word.find('=')), known)));
    else
      print_error("unexpected argument '" + word + "'" + where +
                  (commands.end() != std::find(commands.begin(), commands.end(), word)
                       ? " (one command at a time)"
                       : suggestion(closest_match(word, commands))));
  } else {
    print_error(e.what());
  }
  std::fprintf(stderr, "Run '%s' for %s.\n", help.c_str(), sub ? "its options" : "the commands and options");
}

int run(int argc, char** argv) {
  CLI::App app{"vkformer: transformer inference on any Vulkan device.", "vkformer"};
  app.set_version_flag("--version", std::string("vkformer ") + VKFORMER_VERSION);
  app.footer(kFooter);
  app.require_subcommand(1);
  // Global options may also follow the subcommand name: `vkformer devices --device 1`.
  app.fallthrough();

  GlobalOptions globals;
  app.add_option("--device", globals.device,
                 "Vulkan device to use: an index, a case-insensitive name substring or a UUID, as "
                 "'vkformer devices' lists them (default: VKFORMER_DEVICE, else the first of "
                 "discrete, integrated, virtual, cpu)")
      ->type_name("SPEC")
      // An empty spec (--device "$UNSET_VAR") would otherwise silently mean the default device.
      ->check(CLI::Validator(
          [](std::string& spec) -> std::string {
            return spec.empty() ? "empty device spec: give an index, a name substring or a UUID "
                                  "as 'vkformer devices' lists them, or leave --device out for "
                                  "the default"
                                : "";
          },
          ""));
  app.add_flag("--validation", globals.validation,
               "Enable the Khronos validation layer (VK_LAYER_KHRONOS_validation)");
  app.add_flag("--sync-validation", globals.sync_validation,
               "Enable validation with synchronization validation (implies --validation)");

  // Keep this list in the order `vkformer --help` should show the commands.
  std::vector<Command> commands = {
      add_devices_command(app, globals),
      add_run_command(app, globals),
      add_generate_command(app, globals),
      add_chat_command(app, globals),
      add_perplexity_command(app, globals),
      add_serve_command(app, globals),
      add_demo_command(app, globals),
      add_bench_command(app, globals),
      add_tune_command(app, globals),
      add_embed_command(app, globals),
      add_tokenize_command(app, globals),
  };
  for (auto& c : commands)
    c.app->footer("Global options (--device, --validation, --sync-validation) are listed in "
                  "'vkformer --help'.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    explain_parse_error(e, app);
    return kExitUsage;
  }
  for (auto& c : commands)
    if (c.app->parsed()) {
      try {
        return c.run();
      } catch (const UsageError& e) {
        print_error(e.what());
        std::fprintf(stderr, "Run 'vkformer %s --help' for its options.\n", c.app->get_name().c_str());
        return kExitUsage;
      }
    }
  return kExitUsage;  // unreachable: require_subcommand(1)
}

}  // namespace
}  // namespace vkformer::cli

int main(int argc, char** argv) {
  using vkformer::cli::print_error;
  try {
    // UTF-8 arguments and console on Windows, where argv holds the ANSI code page.
    vkformer::platform::use_utf8_console();
    std::vector<std::string> args = vkformer::platform::utf8_arguments(argc, argv);
    std::vector<char*> utf8_argv;
    for (std::string& a : args) utf8_argv.push_back(a.data());
    utf8_argv.push_back(nullptr);
    return vkformer::cli::run(static_cast<int>(args.size()), utf8_argv.data());
  } catch (const vkformer::Error& e) {
    print_error(e.what());
  } catch (const std::bad_alloc&) {
    print_error("out of host memory");
  } catch (const std::exception& e) {
    print_error(std::string("internal: ") + e.what() + " (please report this)");
  } catch (...) {
    print_error("internal: unknown exception (please report this)");
  }
  return vkformer::cli::kExitError;
}
