#include "tuning_report.hpp"

#include "tuning_cache.hpp"

namespace vkformer::cli {

namespace {

using State = kernels::TuningCacheState;

const char* status_word(State::Status s) {
  switch (s) {
    case State::Status::static_table: return "static";
    case State::Status::absent: return "not tuned";
    case State::Status::tuned: return "tuned";
    case State::Status::ignored: return "ignored";
  }
  return "?";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> tuning_rows(const DeviceInfo& info) {
  const State s = kernels::tuning_cache_state(info);
  const std::string path = s.path.empty() ? std::string("no cache directory") : s.path.string();
  std::vector<std::pair<std::string, std::string>> rows;
  switch (s.status) {
    case State::Status::static_table:
      rows.emplace_back("tuning", "static table (" + s.reason + ")");
      break;
    case State::Status::absent:
      rows.emplace_back("tuning", "static table: not tuned (run 'vkformer tune'; cache " + path + ")");
      break;
    case State::Status::ignored:
      rows.emplace_back("tuning", "static table: the tuning cache " + path + " is ignored: " + s.problem);
      break;
    case State::Status::tuned: {
      size_t changed = 0;
      for (const kernels::TunedChoice& c : s.choices) changed += c.value != c.static_value;
      rows.emplace_back("tuning", "tuned: " + std::to_string(changed) + " of " +
                                      std::to_string(s.choices.size()) +
                                      " measured choices differ from the static table (" + path + ")");
      for (const kernels::TunedChoice& c : s.choices)
        if (c.value != c.static_value)
          rows.emplace_back("", "  " + c.tunable + " = " + c.value + " (static " + c.static_value + ")");
      for (const std::string& o : s.overridden) rows.emplace_back("", "  " + o + " overrides the cache");
      break;
    }
  }
  return rows;
}

nlohmann::ordered_json tuning_json(const DeviceInfo& info) {
  const State s = kernels::tuning_cache_state(info);
  nlohmann::ordered_json j;
  j["status"] = status_word(s.status);
  j["path"] = s.path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.path.string());
  j["problem"] = s.problem.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.problem);
  if (!s.reason.empty()) j["reason"] = s.reason;
  j["choices"] = nlohmann::ordered_json::array();
  for (const kernels::TunedChoice& c : s.choices)
    j["choices"].push_back({{"tunable", c.tunable}, {"value", c.value}, {"static", c.static_value},
                            {"static_us", c.static_us}, {"tuned_us", c.tuned_us}});
  j["overridden"] = s.overridden;
  return j;
}

}  // namespace vkformer::cli
