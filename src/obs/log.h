// Server logs: spdlog loggers, one per component ("api", "store",
// "scheduler", ...), all writing to one sink (stderr unless told otherwise),
// one line per message, as text or as JSON lines. Every line carries the
// current request id (obs/request_id.h) when one is set.
//
//   2024-05-01T12:00:00.123Z info api [3f9c0a1b2d4e5f60] POST /v1/projects/p/jobs -> 200 ...
//   {"time":"2024-05-01T12:00:00.123Z","level":"info","component":"api",
//    "request_id":"3f9c0a1b2d4e5f60","message":"POST /v1/projects/p/jobs -> 200 ..."}
//
// Before InitLogging, lines go to stderr as text at level info. Loggers are
// created on first use and live until the process ends.
// Thread-safe: loggers may be used and InitLogging called from any thread.
#pragma once

#include <memory>
#include <string>

#include <spdlog/formatter.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/sink.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mle::obs {

enum class LogFormat { kText, kJson };

struct LogOptions {
  spdlog::level::level_enum level = spdlog::level::info;
  LogFormat format = LogFormat::kText;
  // Where lines go; null: stderr. (Tests pass an ostream sink.)
  std::shared_ptr<spdlog::sinks::sink> sink;
};

// "trace", "debug", "info", "warn" (or "warning"), "error", "off";
// INVALID_ARGUMENT naming the accepted values otherwise.
absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(absl::string_view name);
// "text" or "json".
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);

// Applies `options` to every logger, present and future.
void InitLogging(const LogOptions& options);

// The logger of `component` (named in each of its lines).
spdlog::logger& Log(absl::string_view component);

// Renders one message as a line in `format` (with the calling thread's
// request id). What InitLogging installs; exposed for tests.
std::unique_ptr<spdlog::formatter> MakeFormatter(LogFormat format);

}  // namespace mle::obs
