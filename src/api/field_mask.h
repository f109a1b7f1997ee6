// Partial responses: the `fields` query parameter of Google APIs, e.g.
//   fields=jobId,state
//   fields=jobs(jobId,state),nextPageToken
//   fields=trainingInput/scaleTier,error
// Paths are separated by commas; "a/b" selects inside a; "a(b,c)" selects b
// and c inside a; "*" keeps everything at its level. Selections apply to
// every element of a list. Pure functions; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace mle::api {

class FieldMask {
 public:
  // INVALID_ARGUMENT (field "fields") for unbalanced parentheses or empty names.
  static absl::StatusOr<FieldMask> Parse(const std::string& text);
  // `value` with only the selected fields. An empty mask keeps everything.
  nlohmann::json Apply(const nlohmann::json& value) const;

 private:
  // A tree of selections: name -> sub-mask (empty sub-mask = whole value).
  nlohmann::json tree_ = nlohmann::json::object();
};

}  // namespace mle::api
