// The wire codec: model values <-> the JSON of the `ml` v1 API, following the
// discovery document (camelCase, int64 as strings, RFC 3339 timestamps, base64
// etags, unset fields omitted). The only place in the server where JSON is
// built or read, together with discovery.h. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/status.h"
#include "model/job.h"
#include "model/project.h"

namespace mle::codec {

// Output-only fields of Job that a create/patch body may carry (e.g. a body
// copied from jobs.get); they are accepted and ignored.
const std::vector<std::string>& JobOutputOnlyFields();

// A request body decoded as far as it can be: `violations` lists every
// unknown field and wrong type (the offending values are left out of `job`),
// so the service can report them together with the semantic violations.
struct DecodedJob {
  model::Job job;
  std::vector<common::FieldViolation> violations;
};

// Checks `body` against GoogleCloudMlV1__Job and decodes what is well-typed.
// Output-only fields are dropped.
DecodedJob DecodeJob(const nlohmann::json& body);
// The strict form: INVALID_ARGUMENT with every wire violation, or the job.
absl::StatusOr<model::Job> DecodeJobRequest(const nlohmann::json& body);

nlohmann::json EncodeJob(const model::Job& job);
nlohmann::json EncodeListJobsResponse(const std::vector<model::Job>& jobs,
                                      const std::string& next_page_token);
nlohmann::json EncodeGetConfigResponse(const model::Project& project);
// {"error": {"code", "message", "status", "details": [BadRequest...]}}
nlohmann::json EncodeError(const absl::Status& status);

// The etag of a job version (base64 bytes on the wire).
std::string EtagForVersion(int64_t version);

// Durable form of a job (wire JSON plus server-internal fields), as stored by
// db/. ParseStoredJob is the inverse, trusting its input's shape.
std::string SerializeJobForStorage(const model::Job& job);
absl::StatusOr<model::Job> ParseStoredJob(absl::string_view text);

// A trainingInput that mlengined encoded itself (EncodeTrainingInput: in a
// Slurm job's launch document), decoded without the schema check that the
// API's input gets: it was checked when the job was created, and the check
// parses the whole discovery document (220 KB), which cost every Slurm
// job's launcher about a fifth of its CPU. A field of the wrong type (a
// damaged file) is a DataLossError, never a crash.
absl::StatusOr<model::TrainingInput> DecodeEncodedTrainingInput(const nlohmann::json& o);

}  // namespace mle::codec
