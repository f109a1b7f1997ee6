// The handlers of the ml v1 study API (studies, trials, their operations)
// and of projects.locations: each checks its query and body (through
// codec/study_codec.h), calls StudyService and renders the result. Access
// was checked by the route table's gate before any of them runs.

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/api_call.h"
#include "api/http_util.h"
#include "codec/study_codec.h"

namespace mle::api::study_routes {
namespace {

using nlohmann::json;
using service::StudyService;

StudyService::StudyRef Ref(const Call& call) {
  return {call.Var("project"), call.Var("location"), call.Var("study")};
}

// The query checked and the body parsed (`{}` when empty); INVALID_ARGUMENT otherwise.
absl::StatusOr<json> Request(const Call& call, std::initializer_list<absl::string_view> params) {
  if (auto st = CheckQuery(call, params); !st.ok()) return st;
  return ParseJsonBody(call.body, /*allow_empty=*/true);
}

// A request with no body fields: checked against its (empty) schema.
absl::Status EmptyRequest(const Call& call, absl::string_view schema) {
  return CheckEmptyBody(call, codec::DiscoverySchema::Embedded(), schema);
}

template <class T, class Encode>
std::function<void(absl::StatusOr<T>)> Reply(Responder respond, bool pretty, Encode encode) {
  return [respond, pretty, encode](absl::StatusOr<T> v) {
    if (!v.ok()) return respond(Fail(v.status(), pretty));
    respond(Render(encode(*v), pretty));
  };
}

json TrialJson(const tuning::StudyTrial& t) { return codec::EncodeTrial(t); }
json OperationJson(const tuning::StudyOperation& op) { return codec::EncodeOperation(op); }

}  // namespace

// ---- projects.locations ----

void GetLocation(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto location = s.studies.GetLocation(call.Var("project"), call.Var("location"));
  if (!location.ok()) return respond(Fail(location.status(), pretty));
  respond(Render(codec::EncodeLocation(*location), pretty));
}

void ListLocations(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"pageSize", "pageToken"}); !st.ok()) return respond(Fail(st, pretty));
  int page_size = 0;
  if (const std::string size = call.Param("pageSize"); !size.empty() && !absl::SimpleAtoi(size, &page_size)) {
    return respond(Fail(BadParam("pageSize", absl::StrCat("must be an integer, got \"", size, "\"")), pretty));
  }
  auto page = s.studies.ListLocations(call.Var("project"), page_size, call.Param("pageToken"));
  if (!page.ok()) return respond(Fail(page.status(), pretty));
  respond(Render(codec::EncodeListLocationsResponse(page->locations, page->next_page_token), pretty));
}

// ---- projects.locations.studies ----

void CreateStudy(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"studyId"}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, /*allow_empty=*/false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto config = codec::DecodeCreateStudyRequest(*body);
  if (!config.ok()) return respond(Fail(config.status(), pretty));
  s.studies.CreateStudy(call.Var("project"), call.Var("location"), call.Param("studyId"), *std::move(config),
                        Reply<tuning::Study>(respond, pretty, codec::EncodeStudy));
}

void GetStudy(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto study = s.studies.GetStudy(call.Var("project"), call.Var("location"), call.Var("study"));
  if (!study.ok()) return respond(Fail(study.status(), pretty));
  respond(Render(codec::EncodeStudy(*study), pretty));
}

void ListStudies(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto studies = s.studies.ListStudies(call.Var("project"), call.Var("location"));
  if (!studies.ok()) return respond(Fail(studies.status(), pretty));
  respond(Render(codec::EncodeListStudiesResponse(*studies), pretty));
}

void DeleteStudy(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  s.studies.DeleteStudy(call.Var("project"), call.Var("location"), call.Var("study"), ReplyEmpty(respond, pretty));
}

// ---- projects.locations.studies.trials ----

void CreateTrial(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, /*allow_empty=*/false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto request = codec::DecodeCreateTrialRequest(*body);
  if (!request.ok()) return respond(Fail(request.status(), pretty));
  StudyService::NewTrial trial{std::move(request->parameters), request->state, std::move(request->measurements),
                               std::move(request->final_measurement)};
  s.studies.CreateTrial(Ref(call), std::move(trial), Reply<tuning::StudyTrial>(respond, pretty, TrialJson));
}

void GetTrial(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto trial = s.studies.GetTrial(Ref(call), call.Var("trial"));
  if (!trial.ok()) return respond(Fail(trial.status(), pretty));
  respond(Render(codec::EncodeTrial(*trial), pretty));
}

void ListTrials(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto trials = s.studies.ListTrials(Ref(call));
  if (!trials.ok()) return respond(Fail(trials.status(), pretty));
  respond(Render(codec::EncodeListTrialsResponse(*trials), pretty));
}

void DeleteTrial(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  s.studies.DeleteTrial(Ref(call), call.Var("trial"), ReplyEmpty(respond, pretty));
}

void AddMeasurement(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  auto body = Request(call, {});
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto request = codec::DecodeAddTrialMeasurementRequest(*body);
  if (!request.ok()) return respond(Fail(request.status(), pretty));
  s.studies.AddMeasurement(Ref(call), call.Var("trial"), std::move(request->measurement), request->elapsed_given,
                           Reply<tuning::StudyTrial>(respond, pretty, TrialJson));
}

void CompleteTrial(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  auto body = Request(call, {});
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto request = codec::DecodeCompleteTrialRequest(*body);
  if (!request.ok()) return respond(Fail(request.status(), pretty));
  StudyService::Completion completion{std::move(request->final_measurement), request->trial_infeasible,
                                      std::move(request->infeasible_reason)};
  s.studies.CompleteTrial(Ref(call), call.Var("trial"), std::move(completion),
                          Reply<tuning::StudyTrial>(respond, pretty, TrialJson));
}

void StopTrial(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = EmptyRequest(call, "GoogleCloudMlV1__StopTrialRequest"); !st.ok()) return respond(Fail(st, pretty));
  s.studies.StopTrial(Ref(call), call.Var("trial"), Reply<tuning::StudyTrial>(respond, pretty, TrialJson));
}

void SuggestTrials(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  auto body = Request(call, {});
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto request = codec::DecodeSuggestTrialsRequest(*body);
  if (!request.ok()) return respond(Fail(request.status(), pretty));
  s.studies.SuggestTrials(Ref(call), request->suggestion_count, request->client_id,
                          Reply<tuning::StudyOperation>(respond, pretty, OperationJson));
}

void CheckEarlyStoppingState(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = EmptyRequest(call, "GoogleCloudMlV1__CheckTrialEarlyStoppingStateRequest"); !st.ok()) {
    return respond(Fail(st, pretty));
  }
  s.studies.CheckEarlyStoppingState(Ref(call), call.Var("trial"),
                                    Reply<tuning::StudyOperation>(respond, pretty, OperationJson));
}

void ListOptimalTrials(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = EmptyRequest(call, "GoogleCloudMlV1__ListOptimalTrialsRequest"); !st.ok()) {
    return respond(Fail(st, pretty));
  }
  auto trials = s.studies.ListOptimalTrials(Ref(call));
  if (!trials.ok()) return respond(Fail(trials.status(), pretty));
  respond(Render(codec::EncodeListOptimalTrialsResponse(*trials), pretty));
}

// ---- projects.locations.operations ----

void GetOperation(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto op = s.studies.GetOperation(call.Var("project"), call.Var("location"), call.Var("operation"));
  if (!op.ok()) return respond(Fail(op.status(), pretty));
  respond(Render(codec::EncodeOperation(*op), pretty));
}

void CancelOperation(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto st = s.studies.CancelOperation(call.Var("project"), call.Var("location"), call.Var("operation"));
  if (!st.ok()) return respond(Fail(st, pretty));
  respond(Render(json::object(), pretty));
}

}  // namespace mle::api::study_routes
