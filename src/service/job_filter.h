// The `filter` of jobs.list, in the gcloud style AI Platform used:
//   state=FAILED
//   jobId:census*                  (":" matches words case-insensitively; * is a wildcard)
//   labels.team=vision AND NOT state=SUCCEEDED
//   (state=RUNNING OR state=QUEUED) createTime>2024-01-01
// Terms join with AND (also implied by a space) and OR (binding tighter than
// AND, as in gcloud); NOT or a leading '-' negates; parentheses group.
// Operators: = != : < <= > >=. Keys: jobId, state, errorMessage, createTime,
// startTime, endTime, labels.KEY, trainingInput.{region,scaleTier,
// runtimeVersion,pythonVersion,pythonModule,masterType,workerType}.
// Immutable once parsed; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "model/job.h"

namespace mle::service {

class JobFilter {
 public:
  struct Node;
  // INVALID_ARGUMENT (field "filter") with a message pointing at the problem.
  static absl::StatusOr<JobFilter> Parse(absl::string_view text);
  // The filter of Vertex AI's customJobs.list (AIP-160, the same grammar):
  // keys display_name, state (JOB_STATE_...), labels.KEY, create_time,
  // start_time, end_time, e.g. state="JOB_STATE_FAILED" AND labels.team=vision.
  static absl::StatusOr<JobFilter> ParseVertex(absl::string_view text);
  bool Matches(const model::Job& job) const;
  bool empty() const { return root_ == nullptr; }

 private:
  static absl::StatusOr<JobFilter> ParseDialect(absl::string_view text, bool vertex);
  std::shared_ptr<const Node> root_;
};

}  // namespace mle::service
