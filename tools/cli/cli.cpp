#include "cli.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace vkformer::cli {

InstanceOptions GlobalOptions::instance_options() const {
  InstanceOptions o;
  o.validation = validation || sync_validation;
  o.sync_validation = sync_validation;
  return o;
}

DeviceOptions GlobalOptions::device_options() const {
  DeviceOptions o;
  static_cast<InstanceOptions&>(o) = instance_options();
  o.selector = device;
  return o;
}

namespace {

template <class T>
std::string check_number(const std::string& text, T lo, T hi) {
  T v{};
  const char* begin = text.data();
  const char* end = begin + text.size();
  // from_chars takes no '+', spaces or base prefixes, but takes "-0" for unsigned types as 0.
  const bool digits = !text.empty() && (text[0] != '-' || lo < T{0}) &&
                      text.find_first_not_of("0123456789", text[0] == '-' ? 1 : 0) == std::string::npos;
  const auto [stop, ec] = digits ? std::from_chars(begin, end, v) : std::from_chars_result{begin, std::errc::invalid_argument};
  if (ec == std::errc() && stop == end && v >= lo && v <= hi) return "";
  std::string shown = text.size() > 40 ? text.substr(0, 40) + "..." : text;
  return "expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got '" +
         shown + "'";
}

template <class T>
CLI::Validator validator(T lo, T hi) {
  return CLI::Validator([lo, hi](std::string& text) { return check_number(text, lo, hi); }, "");
}

}  // namespace

std::string check_whole_number(const std::string& text, int64_t lo, int64_t hi) { return check_number(text, lo, hi); }
std::string check_unsigned_number(const std::string& text, uint64_t lo, uint64_t hi) { return check_number(text, lo, hi); }
CLI::Validator whole_number_in(int64_t lo, int64_t hi) { return validator(lo, hi); }
CLI::Validator unsigned_number_in(uint64_t lo, uint64_t hi) { return validator(lo, hi); }

void usage_error(const std::string& message) { throw UsageError(message); }

std::string utf8_problem(std::string_view text, const std::string& where) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    // Sequence length and the smallest code point it may encode (no overlong forms).
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= text.size();
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; ok && k < n; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      ok = (b >> 6) == 0x2;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (ok) ok = !(n == 2 && cp < 0x80) && !(n == 3 && cp < 0x800) && !(n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) &&
                 !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      char buf[160];
      std::snprintf(buf, sizeof buf, " is not valid UTF-8 (byte 0x%02X at offset %zu)", c, i);
      return where + buf + ": vkformer reads text as UTF-8; convert it first, e.g. iconv -f LATIN1 -t UTF-8";
    }
    i += n;
  }
  return "";
}

void check_utf8(std::string_view text, const std::string& where, bool command_line) {
  std::string problem = utf8_problem(text, where);
  if (problem.empty()) return;
  if (command_line) usage_error(problem);
  throw Error(ErrorCode::invalid_argument, problem);
}

std::string closest_match(const std::string& given, const std::vector<std::string>& candidates) {
  // Levenshtein distance, with a swap of neighbours counting once ("gnerate", "--promt").
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
      for (size_t j = 1; j <= b.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    return d[a.size()][b.size()];
  };
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& c : candidates) {
    const size_t dist = distance(given, c);
    if (dist < best_distance) best = c, best_distance = dist;
  }
  // Near enough to be a typo: a third of the name, at least 1, at most 3 edits.
  const size_t limit = std::clamp<size_t>(given.size() / 3, 1, 3);
  return best_distance <= limit ? best : "";
}

size_t report_validation(Device& device) {
  auto messages = device.take_validation_messages();
  for (const auto& m : messages)
    std::fprintf(stderr, "vkformer: validation %s: %s\n", m.severity.c_str(), m.text.c_str());
  return messages.size();
}

}  // namespace vkformer::cli
