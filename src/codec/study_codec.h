// The wire forms of the ml v1 study API (Vizier): Study, StudyConfig, Trial,
// Measurement, the request bodies of the trial methods, the Operations
// suggest and checkEarlyStoppingState answer with (google.longrunning, their
// metadata and response typed by "@type"), and Location. Decoders check the
// body against the discovery document first and refuse what it does not
// allow (unknown fields, wrong types, unknown enum names) with
// INVALID_ARGUMENT naming each field; output-only fields a body may carry
// (copied from a get) are accepted and ignored. Semantic rules are
// StudyService's (tuning/study.h). Also the durable forms of studies, trials
// and operations as db::Record bodies: a version tag around the wire form.
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tuning/study.h"

namespace mle::codec {

// ---- requests ----

// studies.create's body (a Study): its studyConfig.
absl::StatusOr<tuning::StudyConfig> DecodeCreateStudyRequest(const nlohmann::json& body);

// trials.create's body (a Trial): parameters, state (REQUESTED, ACTIVE or
// COMPLETED; unset: nullopt), measurements and finalMeasurement.
struct CreateTrialRequest {
  std::vector<tuning::TrialParameter> parameters;
  std::optional<tuning::TrialStatus> state;
  std::vector<tuning::TrialMeasurement> measurements;
  std::optional<tuning::TrialMeasurement> final_measurement;
};
absl::StatusOr<CreateTrialRequest> DecodeCreateTrialRequest(const nlohmann::json& body);

// A measurement whose elapsedTime the caller left out has `elapsed_given`
// false (the service fills it in).
struct MeasurementRequest {
  tuning::TrialMeasurement measurement;
  bool elapsed_given = false;
};
// addMeasurement's body; the measurement is required.
absl::StatusOr<MeasurementRequest> DecodeAddTrialMeasurementRequest(const nlohmann::json& body);

struct CompleteTrialRequest {
  std::optional<tuning::TrialMeasurement> final_measurement;
  bool trial_infeasible = false;
  std::string infeasible_reason;
};
absl::StatusOr<CompleteTrialRequest> DecodeCompleteTrialRequest(const nlohmann::json& body);

struct SuggestTrialsRequest {
  int32_t suggestion_count = 0;  // unset: 0
  std::string client_id;
};
absl::StatusOr<SuggestTrialsRequest> DecodeSuggestTrialsRequest(const nlohmann::json& body);

// ---- responses ----

nlohmann::json EncodeStudy(const tuning::Study& study);
nlohmann::json EncodeListStudiesResponse(const std::vector<tuning::Study>& studies);
nlohmann::json EncodeTrial(const tuning::StudyTrial& trial);
nlohmann::json EncodeListTrialsResponse(const std::vector<tuning::StudyTrial>& trials);
nlohmann::json EncodeListOptimalTrialsResponse(const std::vector<tuning::StudyTrial>& trials);
nlohmann::json EncodeOperation(const tuning::StudyOperation& operation);

// Location {name, capabilities: [{type: TRAINING, availableAccelerators}]}.
nlohmann::json EncodeLocation(const tuning::Location& location);
nlohmann::json EncodeListLocationsResponse(const std::vector<tuning::Location>& locations,
                                           const std::string& next_page_token);

// ---- storage (db::Record bodies) ----

struct StoredStudy {
  tuning::Study study;
  int64_t next_trial_id = 1;  // the id the next trial gets
};
std::string SerializeStudyForStorage(const tuning::Study& study, int64_t next_trial_id);
absl::StatusOr<StoredStudy> ParseStoredStudy(absl::string_view text);
std::string SerializeTrialForStorage(const tuning::StudyTrial& trial);
absl::StatusOr<tuning::StudyTrial> ParseStoredTrial(absl::string_view text);
std::string SerializeOperationForStorage(const tuning::StudyOperation& operation);
absl::StatusOr<tuning::StudyOperation> ParseStoredOperation(absl::string_view text);

}  // namespace mle::codec
