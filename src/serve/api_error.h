// A request the server refuses: the HTTP status and OpenAI's error object
// ({"error": {"message", "type", "param", "code"}}), thrown by the request
// parsers and turned into the response by the HTTP layer (serve/http_server.h).
#pragma once
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace mt::serve {

struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status, std::string message, std::string param = "",
           std::string type = "invalid_request_error", std::string code = "")
      : std::runtime_error(std::move(message)), status(status), type(std::move(type)),
        param(std::move(param)), code(std::move(code)) {}
  nlohmann::ordered_json body() const {
    auto null_if_empty = [](const std::string& s) {
      return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
    };
    return {{"error",
             {{"message", what()}, {"type", type}, {"param", null_if_empty(param)},
              {"code", null_if_empty(code)}}}};
  }
};

}  // namespace mt::serve
