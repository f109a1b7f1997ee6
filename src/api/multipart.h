// Splits a multipart/related upload (RFC 2387, as Cloud Storage's
// uploadType=multipart takes it: a JSON metadata part, then the media part)
// that was streamed to a file, without reading the media: only the head
// (at most kMaxMultipartHeadBytes) and the last few KiB are read, and the
// media part is returned as a byte range of the file.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mle::api {

inline constexpr int64_t kMaxMultipartHeadBytes = 2 << 20;  // metadata part and headers

struct MultipartRelated {
  std::string metadata;            // the first part's body (JSON)
  std::string media_content_type;  // the second part's Content-Type, or ""
  int64_t media_offset = 0;
  int64_t media_length = 0;
};

// INVALID_ARGUMENT (saying what is wrong, for a person) when the body does
// not have that shape.
absl::StatusOr<MultipartRelated> SplitMultipartRelated(int fd, int64_t size, absl::string_view content_type);

// The boundary parameter of a multipart Content-Type, unquoted; "" if none.
std::string MultipartBoundary(absl::string_view content_type);

}  // namespace mle::api
