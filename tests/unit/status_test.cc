// common/status: the one table of google.rpc.Code names, absl codes and HTTP
// statuses, both ways; field violations survive as a payload.
#include "common/status.h"

#include <gtest/gtest.h>

namespace mle::common {
namespace {

struct Row {
  absl::StatusCode code;
  std::string name;
  int http;
};

// google/rpc/code.proto, with the HTTP mapping it documents.
const std::vector<Row> kRows = {
    {absl::StatusCode::kOk, "OK", 200},
    {absl::StatusCode::kCancelled, "CANCELLED", 499},
    {absl::StatusCode::kUnknown, "UNKNOWN", 500},
    {absl::StatusCode::kInvalidArgument, "INVALID_ARGUMENT", 400},
    {absl::StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED", 504},
    {absl::StatusCode::kNotFound, "NOT_FOUND", 404},
    {absl::StatusCode::kAlreadyExists, "ALREADY_EXISTS", 409},
    {absl::StatusCode::kPermissionDenied, "PERMISSION_DENIED", 403},
    {absl::StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED", 429},
    {absl::StatusCode::kFailedPrecondition, "FAILED_PRECONDITION", 400},
    {absl::StatusCode::kAborted, "ABORTED", 409},
    {absl::StatusCode::kOutOfRange, "OUT_OF_RANGE", 400},
    {absl::StatusCode::kUnimplemented, "UNIMPLEMENTED", 501},
    {absl::StatusCode::kInternal, "INTERNAL", 500},
    {absl::StatusCode::kUnavailable, "UNAVAILABLE", 503},
    {absl::StatusCode::kDataLoss, "DATA_LOSS", 500},
    {absl::StatusCode::kUnauthenticated, "UNAUTHENTICATED", 401},
};

TEST(StatusCodesTest, NameAndHttpOfEveryCode) {
  for (const auto& row : kRows) {
    EXPECT_EQ(CodeName(row.code), row.name);
    EXPECT_EQ(HttpStatusForCode(row.code), row.http) << row.name;
    EXPECT_EQ(CodeFromName(row.name), row.code) << row.name;
  }
  EXPECT_EQ(CodeName(static_cast<absl::StatusCode>(99)), "UNKNOWN");
  EXPECT_EQ(HttpStatusForCode(static_cast<absl::StatusCode>(99)), 500);
  EXPECT_EQ(CodeFromName("NOT_A_CODE"), std::nullopt);
  EXPECT_EQ(CodeFromName("not_found"), std::nullopt);  // names are exact
  EXPECT_EQ(CodeFromName(""), std::nullopt);
}

TEST(StatusCodesTest, CodeForAnHttpStatusWithoutAName) {
  struct Case {
    int http;
    absl::StatusCode code;
  };
  for (const auto& c : std::vector<Case>{
           {400, absl::StatusCode::kInvalidArgument},
           {401, absl::StatusCode::kUnauthenticated},
           {403, absl::StatusCode::kPermissionDenied},
           {404, absl::StatusCode::kNotFound},
           {409, absl::StatusCode::kAlreadyExists},
           {429, absl::StatusCode::kResourceExhausted},
           {499, absl::StatusCode::kCancelled},
           {500, absl::StatusCode::kInternal},
           {501, absl::StatusCode::kUnimplemented},
           {502, absl::StatusCode::kInternal},
           {503, absl::StatusCode::kUnavailable},
           {504, absl::StatusCode::kDeadlineExceeded},
           {418, absl::StatusCode::kUnknown},
           {200, absl::StatusCode::kUnknown},  // never OK: only errors are mapped
       }) {
    EXPECT_EQ(CodeForHttpStatus(c.http), c.code) << c.http;
  }
}

TEST(StatusCodesTest, EveryHttpStatusOfACodeMapsBackToAnErrorWithThatStatus) {
  for (const auto& row : kRows) {
    if (row.code == absl::StatusCode::kOk) continue;
    EXPECT_EQ(HttpStatusForCode(CodeForHttpStatus(row.http)), row.http) << row.name;
  }
}

TEST(FieldViolationsTest, RoundTrip) {
  const std::vector<FieldViolation> violations = {{"trainingInput.region", "is required"},
                                                  {"jobId", "must start with a letter"}};
  absl::Status s = InvalidArgumentWithViolations("Bad job.", violations);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Bad job. trainingInput.region: is required; jobId: must start with a letter");
  EXPECT_EQ(GetFieldViolations(s), violations);
  EXPECT_TRUE(GetFieldViolations(absl::NotFoundError("x")).empty());
}

}  // namespace
}  // namespace mle::common
