#include "obs/log.h"

#include <time.h>

#include <chrono>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "obs/request_id.h"

namespace mle::obs {
namespace {

// RFC 3339, UTC, milliseconds: 2024-05-01T12:00:00.123Z
std::string FormatTime(spdlog::log_clock::time_point t) {
  const auto since_epoch = t.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
  const time_t tt = static_cast<time_t>(seconds.count());
  struct tm tm;
  gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(millis));
  return buf;
}

absl::string_view LevelName(spdlog::level::level_enum level) {
  const auto name = spdlog::level::to_string_view(level);
  return absl::string_view(name.data(), name.size());
}

void Append(spdlog::memory_buf_t& dest, absl::string_view text) { dest.append(text.data(), text.data() + text.size()); }

class LineFormatter final : public spdlog::formatter {
 public:
  explicit LineFormatter(LogFormat format) : format_(format) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string& request_id = CurrentRequestId();
    const absl::string_view component(msg.logger_name.data(), msg.logger_name.size());
    const absl::string_view message(msg.payload.data(), msg.payload.size());
    if (format_ == LogFormat::kJson) {
      nlohmann::json line = {{"time", FormatTime(msg.time)},
                             {"level", LevelName(msg.level)},
                             {"component", component},
                             {"message", message}};
      if (!request_id.empty()) line["request_id"] = request_id;
      // Invalid UTF-8 (e.g. from a program's output) becomes U+FFFD, never an exception.
      Append(dest, line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      Append(dest, absl::StrCat(FormatTime(msg.time), " ", LevelName(msg.level), " ", component, " "));
      if (!request_id.empty()) Append(dest, absl::StrCat("[", request_id, "] "));
      Append(dest, message);
    }
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<LineFormatter>(format_); }

 private:
  const LogFormat format_;
};

// Every logger writes to `sink`, which forwards to the configured sink; so
// InitLogging can change where lines go while other threads log.
struct Registry {
  std::mutex mu;
  std::shared_ptr<spdlog::sinks::dist_sink_mt> sink = std::make_shared<spdlog::sinks::dist_sink_mt>();
  spdlog::level::level_enum level = spdlog::level::info;
  std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> loggers;

  Registry() {
    sink->set_sinks({std::make_shared<spdlog::sinks::stderr_sink_mt>()});
    sink->set_formatter(MakeFormatter(LogFormat::kText));
  }
};

Registry& TheRegistry() {
  static Registry* registry = new Registry;  // never destroyed: threads may log during exit
  return *registry;
}

}  // namespace

absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "trace") return spdlog::level::trace;
  if (n == "debug") return spdlog::level::debug;
  if (n == "info") return spdlog::level::info;
  if (n == "warn" || n == "warning") return spdlog::level::warn;
  if (n == "error") return spdlog::level::err;
  if (n == "off") return spdlog::level::off;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level \"", name, "\": use trace, debug, info, warn, error or off"));
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("unknown log format \"", name, "\": use text or json"));
}

std::unique_ptr<spdlog::formatter> MakeFormatter(LogFormat format) { return std::make_unique<LineFormatter>(format); }

void InitLogging(const LogOptions& options) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.sink->set_sinks({options.sink ? options.sink : std::make_shared<spdlog::sinks::stderr_sink_mt>()});
  r.sink->set_formatter(MakeFormatter(options.format));
  r.level = options.level;
  for (auto& [name, logger] : r.loggers) logger->set_level(r.level);
}

spdlog::logger& Log(absl::string_view component) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.loggers.find(component);
  if (it == r.loggers.end()) {
    auto logger = std::make_shared<spdlog::logger>(std::string(component), r.sink);
    logger->set_level(r.level);
    it = r.loggers.emplace(std::string(component), std::move(logger)).first;
  }
  return *it->second;
}

}  // namespace mle::obs
