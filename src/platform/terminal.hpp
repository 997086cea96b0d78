#pragma once
// The console, for the command-line tool: whether a stream is a terminal (progress lines are
// redrawn only there), and, on Windows, UTF-8 in both directions: the arguments as UTF-8 (argv
// holds the ANSI code page, which cannot spell most non-ASCII paths) and the console's output
// code page set to UTF-8.
#include <cstdio>
#include <string>
#include <vector>

namespace vkformer::platform {

bool is_terminal(std::FILE* stream);

// The command line's arguments as UTF-8: argv itself on POSIX, the wide command line on Windows.
std::vector<std::string> utf8_arguments(int argc, char** argv);

// Windows: the console shows what the program prints as UTF-8. Elsewhere nothing to do.
void use_utf8_console();

}  // namespace vkformer::platform
