// Fuzzes the request JSON codec the way jobs.create, jobs.patch and
// jobs.cancel use it: ParseJsonBody (the API's own JSON parse, with its depth
// limit), the discovery-document check and DecodeJob. Properties checked on
// every body that decodes:
//  - what the server would send back for the job (EncodeJob) passes the
//    discovery document's own check of GoogleCloudMlV1__Job;
//  - the storage form round-trips: ParseStoredJob(SerializeJobForStorage(j))
//    encodes to the same JSON as j.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/http_util.h"
#include "codec/discovery.h"
#include "codec/job_codec.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "job_codec_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mle::codec::DiscoverySchema;
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto parsed = mle::api::ParseJsonBody(body, /*allow_empty=*/true);
  if (!parsed.ok()) return 0;

  // jobs.cancel's body: its schema has no fields, so anything but {} is refused.
  const auto cancel = DiscoverySchema::Embedded().Check(*parsed, "GoogleCloudMlV1__CancelJobRequest");
  if (cancel.empty() != (parsed->is_null() || *parsed == nlohmann::json::object())) {
    Fail("CancelJobRequest check", parsed->dump());
  }

  // jobs.create: every well-typed value is kept, the rest reported; jobs.patch
  // (the strict form) succeeds exactly when nothing was reported.
  mle::codec::DecodedJob decoded = mle::codec::DecodeJob(*parsed);
  if (mle::codec::DecodeJobRequest(*parsed).ok() != decoded.violations.empty()) {
    Fail("DecodeJobRequest disagrees with DecodeJob", parsed->dump());
  }
  mle::model::Job& job = decoded.job;
  job.project = "p";
  job.version = 3;
  const nlohmann::json encoded = mle::codec::EncodeJob(job);
  if (auto v = DiscoverySchema::Embedded().Check(encoded, "GoogleCloudMlV1__Job"); !v.empty()) {
    Fail("EncodeJob produced JSON the discovery document refuses",
         v.front().field + ": " + v.front().description + "\n" + encoded.dump());
  }
  auto stored = mle::codec::ParseStoredJob(mle::codec::SerializeJobForStorage(job));
  if (!stored.ok()) Fail("the storage form does not parse back", stored.status().ToString());
  const std::string again = mle::codec::EncodeJob(*stored).dump();
  if (again != encoded.dump()) Fail("the storage form does not round-trip", encoded.dump() + "\n" + again);
  return 0;
}
