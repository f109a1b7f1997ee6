#include "cli/logs.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace mle::cli {

using nlohmann::json;

std::string FormatLogEntry(const json& entry) {
  auto str = [&](const char* key) {
    return entry.contains(key) && entry[key].is_string() ? entry[key].get<std::string>() : std::string();
  };
  std::string message = str("message");
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.pop_back();
  const std::string trial = str("trialId");
  return absl::StrCat(str("timestamp"), " ", str("taskName"), " ", trial.empty() ? "" : absl::StrCat("trial=", trial, " "),
                      message);
}

absl::Status StreamLogs(Client& client, const std::string& job_id, const StreamLogsOptions& options, std::FILE* out) {
  const int wait = std::clamp(options.polling_interval_s, 1, 30);
  std::string token = options.since_now ? "end" : "";
  while (true) {
    const auto started = std::chrono::steady_clock::now();
    auto reply = client.ReadLogs(job_id, token, options.task_name, wait, options.trial_id);
    if (!reply.ok()) return reply.status();
    size_t printed = 0;
    if (reply->contains("entries") && (*reply)["entries"].is_array()) {
      for (const auto& e : (*reply)["entries"]) {
        std::fprintf(out, "%s\n", FormatLogEntry(e).c_str());
        ++printed;
      }
      std::fflush(out);
    }
    if (reply->contains("nextPageToken") && (*reply)["nextPageToken"].is_string() &&
        !(*reply)["nextPageToken"].get<std::string>().empty()) {
      token = (*reply)["nextPageToken"].get<std::string>();
    }
    if (reply->value("jobEnded", false)) return absl::OkStatus();
    // A server that does not wait (or an empty reply): do not spin.
    if (printed == 0) {
      const auto elapsed = std::chrono::steady_clock::now() - started;
      const auto pause = std::chrono::milliseconds(500) - elapsed;
      if (pause > std::chrono::milliseconds(0)) std::this_thread::sleep_for(pause);
    }
  }
}

}  // namespace mle::cli
