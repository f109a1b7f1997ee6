// The wire codec of Vertex AI's aiplatform v1 customJobs: model::Job (with
// its VertexJob, model/vertex.h) <-> the JSON of CustomJob, following
// api/aiplatform.v1.json (camelCase, int64 as strings, RFC 3339 times,
// enums as names). Pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "common/status.h"
#include "model/job.h"

namespace mle::codec {

// A create body decoded as far as it can be: `violations` lists every
// unknown field and wrong type (by its wire path), the job holds the rest.
// The job's vertex is set, and its training_input made from it
// (model::TrainingInputOf); its labels are the body's. Output-only fields
// (a body copied from a get) are accepted and ignored.
struct DecodedVertexJob {
  model::Job job;
  std::vector<common::FieldViolation> violations;
};
// `location`: the {location} of the request's parent.
DecodedVertexJob DecodeCustomJob(const nlohmann::json& body, const std::string& location);

// "projects/P/locations/L/customJobs/ID"
std::string CustomJobName(const model::Job& job);
nlohmann::json EncodeCustomJob(const model::Job& job);
nlohmann::json EncodeListCustomJobsResponse(const std::vector<model::Job>& jobs, const std::string& next_page_token);

// The spec as stored beside the job (codec/job_codec.h's storage form).
nlohmann::json EncodeVertexForStorage(const model::VertexJob& vertex);
model::VertexJob DecodeVertexFromStorage(const nlohmann::json& o);

}  // namespace mle::codec
