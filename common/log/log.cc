#include "common/log/log.h"

#include <cstdlib>

#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace tae::log {

void Setup(const std::string& program, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt(program);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ %n: %v");
  const char* env = std::getenv("TAE_LOG_LEVEL");
  logger->set_level(spdlog::level::from_str(env != nullptr && *env != '\0' ? env : level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace tae::log
