#pragma once
// An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with an
// HTTP status. Thrown by request parsing and the handlers; the HTTP layer turns it into the reply.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace vkformer::server {

struct ApiError : std::runtime_error {
  int status;
  std::string type;   // invalid_request_error, authentication_error, server_error, ...
  std::string param;  // the offending field, or ""
  std::string code;   // e.g. context_length_exceeded, model_not_found, or ""

  ApiError(int status_, std::string type_, std::string message, std::string param_ = {},
           std::string code_ = {})
      : std::runtime_error(std::move(message)), status(status_), type(std::move(type_)),
        param(std::move(param_)), code(std::move(code_)) {}

  nlohmann::json to_json() const {
    nlohmann::json e = {{"message", what()}, {"type", type}};
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
    return {{"error", e}};
  }
};

// 400 invalid_request_error naming the field.
inline ApiError bad_request(const std::string& param, const std::string& message,
                            const std::string& code = {}) {
  return ApiError(400, "invalid_request_error", message, param, code);
}

}  // namespace vkformer::server
