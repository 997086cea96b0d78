#include "cli.hpp"

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

size_t report_validation(Device& device) {
  auto messages = device.take_validation_messages();
  for (const auto& m : messages)
    std::fprintf(stderr, "vkformer: validation %s: %s\n", m.severity.c_str(), m.text.c_str());
  return messages.size();
}

}  // namespace vkformer::cli
