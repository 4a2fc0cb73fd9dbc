#include "base/log.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace herd {

void InitLogging(absl::string_view component, absl::string_view file, absl::string_view level) {
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (!file.empty()) {
    sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(std::string(file)));
  }
  auto logger = std::make_shared<spdlog::logger>(std::string(component), sinks.begin(), sinks.end());
  std::string lvl(level);
  if (const char* env = std::getenv("HERD_LOG_LEVEL")) lvl = env;
  logger->set_level(spdlog::level::from_str(lvl));
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %L %n] %v");
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace herd
