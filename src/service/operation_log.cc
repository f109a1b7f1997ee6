#include "service/operation_log.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"

namespace mle::service {
std::string NewVertexId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<uint64_t> digits(1'000'000'000'000'000'000ULL, 9'223'372'036'854'775'807ULL);
  return absl::StrCat(digits(rng));
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
