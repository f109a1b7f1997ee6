#include "cli/logs.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
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

namespace {

// Prints a page's entries; takes its token; whether the job has ended.
bool TakePage(const json& page, std::string& token, std::FILE* out, size_t* printed) {
  if (page.contains("entries") && page["entries"].is_array()) {
    for (const auto& e : page["entries"]) {
      std::fprintf(out, "%s\n", FormatLogEntry(e).c_str());
      ++*printed;
    }
    std::fflush(out);
  }
  if (page.contains("nextPageToken") && page["nextPageToken"].is_string() &&
      !page["nextPageToken"].get<std::string>().empty()) {
    token = page["nextPageToken"].get<std::string>();
  }
  return page.value("jobEnded", false);
}

// A request that printed nothing takes at least half a second, whatever
// the server does: never a tight loop of requests.
void PauseIfIdle(size_t printed, std::chrono::steady_clock::time_point started) {
  if (printed > 0) return;
  const auto pause = std::chrono::milliseconds(500) - (std::chrono::steady_clock::now() - started);
  if (pause > std::chrono::milliseconds(0)) std::this_thread::sleep_for(pause);
}

// An mlengined older than streamed logs refuses alt=sse (or another server
// ignores it).
bool RefusesStreams(const absl::Status& st) {
  return (st.code() == absl::StatusCode::kInvalidArgument && absl::StrContains(st.message(), "  alt: ")) ||
         st.code() == absl::StatusCode::kUnimplemented;
}

}  // namespace

absl::Status StreamLogs(Client& client, const std::string& job_id, const StreamLogsOptions& options, std::FILE* out) {
  std::string token = options.since_now ? "end" : "";
  // Followed in one streamed response (alt=sse), each line as it is
  // written; again from the last page where the server ends a stream before
  // the job has (it does after a while, to check access again).
  for (;;) {
    bool ended = false;
    absl::Status error;
    size_t printed = 0;
    const auto started = std::chrono::steady_clock::now();
    absl::Status st = client.FollowLogs(job_id, token, options.task_name, options.trial_id,
                                        [&](const std::string& type, const json& event) {
                                          if (type == "error") {
                                            const long code = event.contains("error") && event["error"].is_object()
                                                                  ? event["error"].value("code", 500L)
                                                                  : 500L;
                                            error = ApiError(code, event.dump());
                                            return false;
                                          }
                                          if (!type.empty()) return true;  // a kind this CLI does not know
                                          ended = TakePage(event, token, out, &printed);
                                          return !ended;
                                        });
    if (ended) return absl::OkStatus();
    if (!error.ok()) return error;
    if (RefusesStreams(st)) break;
    if (!st.ok()) return st;
    PauseIfIdle(printed, started);  // a stream that ended at once with nothing
  }
  // The long poll.
  const int wait = std::clamp(options.polling_interval_s, 1, 30);
  while (true) {
    const auto started = std::chrono::steady_clock::now();
    auto reply = client.ReadLogs(job_id, token, options.task_name, wait, options.trial_id);
    if (!reply.ok()) return reply.status();
    size_t printed = 0;
    if (TakePage(*reply, token, out, &printed)) return absl::OkStatus();
    PauseIfIdle(printed, started);  // a server that does not wait, or an empty reply
  }
}

}  // namespace mle::cli
