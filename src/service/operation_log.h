// OperationLog: the long-running operations Vertex AI's API answers with (a
// custom or tuning job's deletion), for its operations methods (get, list,
// wait, cancel, delete). mlengine finishes each such operation before it
// answers the call that started it, so every operation here is done; the
// log keeps them so that a client that polls or waits on one finds it, as
// on Vertex. Kept in memory, the newest kMaxPerLocation per project and
// location: a restart of mlengined forgets them (a client that asks after
// one gets NOT_FOUND; the deletion itself stands). docs/vertex.md.
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace mle::service {

// A name Vertex AI's way: a decimal number of 19 digits (its jobs' ids and
// its operations'). Ids grow with time: a store keeps new jobs at the end of
// its index, as ml v1's usual ids do (random ones cost a create a third of
// its throughput: bench/vertex_throughput.sh).
std::string NewVertexId();

struct OperationRecord {
  std::string project;
  std::string location;
  std::string id;             // the last segment of its name
  std::string target;         // the resource it acted on ("projects/P/locations/L/customJobs/J")
  std::string metadata_type;  // "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"
  std::string response_type;  // "type.googleapis.com/google.protobuf.Empty"
  absl::Time create_time;
  absl::Time update_time;
  int64_t sequence = 0;       // its order in the log (list pages go by it)

  // "projects/P/locations/L/operations/ID"
  std::string Name() const;
};

class OperationLog {
 public:
  static constexpr size_t kMaxPerLocation = 1000;

  // Records a done operation on `target` and returns it (its id a fresh
  // decimal number, as Vertex's are).
  OperationRecord Add(const std::string& project, const std::string& location, const std::string& target,
                      const std::string& metadata_type, const std::string& response_type, absl::Time now);
  std::optional<OperationRecord> Get(const std::string& project, const std::string& location,
                                     const std::string& id) const;
  // Newest first: up to `page_size` after the one of sequence `after` (all
  // when unset), only those on `target` when one is given; `more` says
  // whether any are left.
  std::vector<OperationRecord> List(const std::string& project, const std::string& location,
                                    std::optional<int64_t> after, size_t page_size, bool* more,
                                    std::string_view target = {}) const;
  // Forgets one (Operations.DeleteOperation); false when there is none.
  bool Delete(const std::string& project, const std::string& location, const std::string& id);

 private:
  using Key = std::pair<std::string, std::string>;  // project, location
  mutable std::mutex mu_;
  std::map<Key, std::deque<OperationRecord>> by_location_ ABSL_GUARDED_BY(mu_);  // oldest first
  int64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace mle::service
