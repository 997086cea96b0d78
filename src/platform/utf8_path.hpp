#pragma once
// Paths as UTF-8 text on every platform. std::filesystem::path built from a std::string, and
// path::string(), use the ANSI code page on Windows, which cannot hold most non-ASCII names;
// these go through char8_t, which the standard defines as UTF-8. On POSIX both are byte copies.
#include <filesystem>
#include <string>
#include <string_view>

namespace vkformer::platform {

inline std::filesystem::path path_from_utf8(std::string_view utf8) {
  return std::filesystem::path(std::u8string(utf8.begin(), utf8.end()));
}

inline std::string path_to_utf8(const std::filesystem::path& path) {
  const std::u8string u8 = path.u8string();
  return std::string(u8.begin(), u8.end());
}

#ifdef _WIN32
// The system's text for a GetLastError() code, as UTF-8 ("The system cannot find the file
// specified. (error 2)").
std::string windows_error_text(unsigned long code);
#endif

}  // namespace vkformer::platform
