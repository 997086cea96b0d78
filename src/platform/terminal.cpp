#include "terminal.hpp"

#ifdef _WIN32
#include <io.h>
#include <windows.h>
// CommandLineToArgvW
#include <shellapi.h>
#else
#include <unistd.h>
#endif

namespace vkformer::platform {

#ifdef _WIN32

bool is_terminal(std::FILE* stream) {
  // A console handle; _isatty alone also says yes for NUL, a character device.
  const auto handle = reinterpret_cast<HANDLE>(_get_osfhandle(_fileno(stream)));
  DWORD mode = 0;
  return handle != INVALID_HANDLE_VALUE && GetConsoleMode(handle, &mode) != 0;
}

std::vector<std::string> utf8_arguments(int argc, char** argv) {
  int n = 0;
  wchar_t** wide = CommandLineToArgvW(GetCommandLineW(), &n);
  if (!wide) return std::vector<std::string>(argv, argv + argc);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    const int bytes = WideCharToMultiByte(CP_UTF8, 0, wide[i], -1, nullptr, 0, nullptr, nullptr);
    std::string s(static_cast<size_t>(bytes > 0 ? bytes - 1 : 0), '\0');
    if (bytes > 1) WideCharToMultiByte(CP_UTF8, 0, wide[i], -1, s.data(), bytes, nullptr, nullptr);
    out.push_back(std::move(s));
  }
  LocalFree(wide);
  return out;
}

void use_utf8_console() { SetConsoleOutputCP(CP_UTF8); }

#else

bool is_terminal(std::FILE* stream) { return ::isatty(::fileno(stream)) != 0; }

std::vector<std::string> utf8_arguments(int argc, char** argv) {
  return std::vector<std::string>(argv, argv + argc);
}

void use_utf8_console() {}

#endif

}  // namespace vkformer::platform
