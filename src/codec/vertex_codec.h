// The wire codec of Vertex AI's aiplatform v1 customJobs and
// hyperparameterTuningJobs: model::Job (with its VertexJob, model/vertex.h)
// <-> the JSON of CustomJob and HyperparameterTuningJob, following
// api/aiplatform.v1.json (camelCase, int64 as strings, RFC 3339 times,
// enums as names). Pure functions, thread-safe.
#pragma once

#include <optional>
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
// A tuning job's: its trialJobSpec is the VertexJob's spec, its studySpec
// and trial counts its study (unserved study fields recorded as above).
DecodedVertexJob DecodeHyperparameterTuningJob(const nlohmann::json& body, const std::string& location);

// "projects/P/locations/L/customJobs/ID" or ".../hyperparameterTuningJobs/ID"
std::string VertexJobName(const model::Job& job);
// A CustomJob, or for a tuning job a HyperparameterTuningJob with its
// trials (each trial's state, parameters as numbers or strings, its
// measurements and final measurement under the study's metricId).
nlohmann::json EncodeVertexJob(const model::Job& job);
// DumpJson(EncodeVertexJob(job), indent) (codec/json_text.h), written
// without the tree where it can be: an answer's text.
std::string VertexJobText(const model::Job& job, int indent);
// That text when it can be written without the tree (a job whose strings
// are printable ASCII); nullopt otherwise.
std::optional<std::string> VertexJobTextWithoutTree(const model::Job& job, int indent);
// customJobs.list's or (tuning) hyperparameterTuningJobs.list's answer.
nlohmann::json EncodeListVertexJobsResponse(const std::vector<model::Job>& jobs, bool tuning,
                                            const std::string& next_page_token);

// The job's spec alone (a CustomJobSpec: a custom job's jobSpec, a tuning
// job's trialJobSpec), as a replica's CLUSTER_SPEC and TF_CONFIG carry it.
nlohmann::json EncodeVertexJobSpec(const model::VertexJob& vertex);

// The spec as stored beside the job (codec/job_codec.h's storage form).
nlohmann::json EncodeVertexForStorage(const model::VertexJob& vertex);
// DumpJson(EncodeVertexForStorage(vertex)), written without the tree where
// it can be (each write of a Vertex job's row carries it).
std::string VertexStorageText(const model::VertexJob& vertex);
model::VertexJob DecodeVertexFromStorage(const nlohmann::json& o);

}  // namespace mle::codec
