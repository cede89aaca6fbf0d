#pragma once

#include <string>

namespace tae::log {

// Configures the default spdlog logger for a program: lines on stderr prefixed with the time,
// level and program name. level: trace, debug, info, warn, error (TAE_LOG_LEVEL overrides).
void Setup(const std::string& program, const std::string& level = "info");

}  // namespace tae::log
