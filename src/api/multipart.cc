#include "api/multipart.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mle::api {
namespace {

constexpr int64_t kTailBytes = 4096;

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "The multipart upload is malformed: ", why,
      ". uploadType=multipart takes a multipart/related body: a JSON metadata part, then the object's bytes."));
}

absl::StatusOr<std::string> ReadAt(int fd, int64_t offset, int64_t length) {
  std::string out(static_cast<size_t>(length), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd, out.data() + got, out.size() - got, offset + static_cast<int64_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("cannot read the upload: ", std::strerror(errno)));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

// The part's headers (from `at`, just after a delimiter line) up to the
// blank line; *body_at is where its body starts. False when incomplete.
bool PartHeaders(absl::string_view text, size_t at, std::string* content_type, size_t* body_at) {
  const size_t end = text.find("\r\n\r\n", at);
  if (end == absl::string_view::npos) {
    // No headers at all: the body follows the delimiter's line at once.
    if (absl::StartsWith(text.substr(at), "\r\n")) {
      *body_at = at + 2;
      return true;
    }
    return false;
  }
  if (text.substr(at, 2) == "\r\n") {  // an empty header block
    *body_at = at + 2;
    return true;
  }
  for (absl::string_view line : absl::StrSplit(text.substr(at, end - at), "\r\n")) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)), "content-type")) {
      *content_type = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  *body_at = end + 4;
  return true;
}

}  // namespace

std::string MultipartBoundary(absl::string_view content_type) {
  for (absl::string_view param : absl::StrSplit(content_type, ';')) {
    param = absl::StripAsciiWhitespace(param);
    if (!absl::StartsWithIgnoreCase(param, "boundary=")) continue;
    absl::string_view value = param.substr(9);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    return std::string(value);
  }
  return "";
}

absl::StatusOr<MultipartRelated> SplitMultipartRelated(int fd, int64_t size, absl::string_view content_type) {
  if (!absl::StartsWithIgnoreCase(absl::StripAsciiWhitespace(content_type), "multipart/related")) {
    return Bad(absl::StrCat("its Content-Type is \"", content_type, "\", not multipart/related"));
  }
  const std::string boundary = MultipartBoundary(content_type);
  if (boundary.empty() || boundary.size() > 70) return Bad("its Content-Type has no usable boundary parameter");
  const std::string delimiter = "--" + boundary;

  auto head = ReadAt(fd, 0, std::min(size, kMaxMultipartHeadBytes));
  if (!head.ok()) return head.status();
  absl::string_view text = *head;
  // The first delimiter: at the start, or after a preamble line.
  size_t first = absl::StartsWith(text, delimiter) ? 0 : text.find("\r\n" + delimiter);
  if (first == absl::string_view::npos) return Bad("the boundary never appears");
  if (first != 0) first += 2;
  size_t at = first + delimiter.size();
  if (text.substr(at, 2) != "\r\n") return Bad("the first boundary line does not end in CRLF");
  at += 2;
  MultipartRelated out;
  std::string metadata_type;
  size_t metadata_at = 0;
  if (!PartHeaders(text, at, &metadata_type, &metadata_at)) return Bad("the metadata part's headers never end");
  const size_t second = text.find("\r\n" + delimiter, metadata_at);
  if (second == absl::string_view::npos) {
    return Bad(absl::StrCat("the metadata part does not end within the first ", kMaxMultipartHeadBytes, " bytes"));
  }
  out.metadata = std::string(text.substr(metadata_at, second - metadata_at));
  at = second + 2 + delimiter.size();
  if (text.substr(at, 2) == "--") return Bad("there is no media part after the metadata");
  if (text.substr(at, 2) != "\r\n") return Bad("the second boundary line does not end in CRLF");
  at += 2;
  size_t media_at = 0;
  if (!PartHeaders(text, at, &out.media_content_type, &media_at)) return Bad("the media part's headers never end");
  out.media_offset = static_cast<int64_t>(media_at);

  // The close delimiter: the last "\r\n--boundary--" of the body.
  const int64_t tail_at = std::max<int64_t>(out.media_offset, size - kTailBytes);
  auto tail = ReadAt(fd, tail_at, size - tail_at);
  if (!tail.ok()) return tail.status();
  const size_t close = tail->rfind("\r\n" + delimiter + "--");
  if (close == std::string::npos) return Bad("the closing boundary (--BOUNDARY--) is missing at the end");
  for (char c : absl::string_view(*tail).substr(close + 4 + delimiter.size())) {
    if (c != '\r' && c != '\n' && c != ' ' && c != '\t') return Bad("there is data after the closing boundary");
  }
  out.media_length = tail_at + static_cast<int64_t>(close) - out.media_offset;
  if (out.media_length < 0) return Bad("the media part overlaps the closing boundary");
  return out;
}

}  // namespace mle::api
