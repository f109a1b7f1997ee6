#include "service/operation_log.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace mle::service {
std::string NewVertexId() {
  // The microseconds since 1970 times 1024: 19 digits from 2001 to 2255.
  // Strictly increasing within a process (a later id for each call), and
  // across restarts as the clock goes.
  static std::atomic<uint64_t> last{0};
  const auto micros = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  uint64_t id = last.load(std::memory_order_relaxed);
  uint64_t next = 0;
  do {
    next = std::max(id + 1, micros << 10);
  } while (!last.compare_exchange_weak(id, next, std::memory_order_relaxed));
  return absl::StrCat(next);
}

std::string OperationRecord::Name() const {
  return absl::StrCat("projects/", project, "/locations/", location, "/operations/", id);
}

OperationRecord OperationLog::Add(const std::string& project, const std::string& location, const std::string& target,
                                  const std::string& metadata_type, const std::string& response_type,
                                  absl::Time now) {
  OperationRecord r;
  r.project = project;
  r.location = location;
  r.id = NewVertexId();
  r.target = target;
  r.metadata_type = metadata_type;
  r.response_type = response_type;
  r.create_time = now;
  r.update_time = now;
  std::lock_guard lock(mu_);
  r.sequence = next_sequence_++;
  auto& log = by_location_[{project, location}];
  log.push_back(r);
  while (log.size() > kMaxPerLocation) log.pop_front();
  return r;
}

std::optional<OperationRecord> OperationLog::Get(const std::string& project, const std::string& location,
                                                 const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = by_location_.find({project, location});
  if (it == by_location_.end()) return std::nullopt;
  for (const auto& r : it->second) {
    if (r.id == id) return r;
  }
  return std::nullopt;
}

std::vector<OperationRecord> OperationLog::List(const std::string& project, const std::string& location,
                                                std::optional<int64_t> after, size_t page_size, bool* more,
                                                std::string_view target) const {
  std::vector<OperationRecord> out;
  *more = false;
  std::lock_guard lock(mu_);
  auto it = by_location_.find({project, location});
  if (it == by_location_.end()) return out;
  for (auto r = it->second.rbegin(); r != it->second.rend(); ++r) {
    if ((after && r->sequence >= *after) || (!target.empty() && r->target != target)) continue;
    if (out.size() == page_size) {
      *more = true;
      break;
    }
    out.push_back(*r);
  }
  return out;
}

bool OperationLog::Delete(const std::string& project, const std::string& location, const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = by_location_.find({project, location});
  if (it == by_location_.end()) return false;
  auto& log = it->second;
  auto r = std::find_if(log.begin(), log.end(), [&](const OperationRecord& o) { return o.id == id; });
  if (r == log.end()) return false;
  log.erase(r);
  return true;
}

}  // namespace mle::service
