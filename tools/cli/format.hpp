#pragma once
// Small text-formatting helpers for the tool's human-readable output.
#include <cstdint>
#include <string>
#include <vector>

namespace vkformer::cli {

// printf's formatting into a string ("%.1f%%", "0x%04X"), of any length.
[[gnu::format(printf, 1, 2)]] std::string fmt(const char* format, ...);
// "512 bytes", "32 KiB", "1.5 GiB" (binary units, at most one decimal).
std::string human_bytes(uint64_t bytes);
// "4 GiB (4294967295 bytes)": the rounded size and the exact count, for limits people compare.
std::string bytes_with_exact(uint64_t bytes);
const char* yes_no(bool value);
// `text` split at spaces into lines of at most `width` characters (longer words stay whole).
std::vector<std::string> wrap(const std::string& text, size_t width);

}  // namespace vkformer::cli
