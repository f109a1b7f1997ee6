#include "api/route_table.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/http_util.h"
#include "obs/log.h"

namespace mle::api {
namespace {

[[noreturn]] void BadPattern(absl::string_view pattern, absl::string_view why) {
  obs::Log("api").critical("bug: the route pattern \"{}\" is malformed: {}", std::string(pattern), std::string(why));
  std::abort();
}

}  // namespace

Responder NameResponses(Responder respond, const std::string& route) {
  return [respond = std::move(respond), &route](HttpResponse r) {
    r.route = route;
    respond(std::move(r));
  };
}

absl::StatusOr<RequestPath> SplitRequestPath(absl::string_view raw_path, PathSyntax syntax) {
  RequestPath path;
  std::vector<absl::string_view> raw;
  if (syntax.ignore_empty_segments) {
    raw = absl::StrSplit(raw_path, '/', absl::SkipEmpty());
  } else {
    absl::ConsumePrefix(&raw_path, "/");
    if (!raw_path.empty()) raw = absl::StrSplit(raw_path, '/');
  }
  if (syntax.custom_verbs && !raw.empty()) {
    absl::string_view& last = raw.back();
    if (auto colon = last.rfind(':'); colon != absl::string_view::npos) {
      path.verb = std::string(last.substr(colon + 1));
      last = last.substr(0, colon);
    }
  }
  for (absl::string_view s : raw) {
    auto decoded = PercentDecode(s, false);
    if (!decoded) return absl::InvalidArgumentError("The request path is not correctly percent-encoded.");
    path.segments.push_back(*std::move(decoded));
  }
  return path;
}

PathPattern::PathPattern(absl::string_view pattern, PathSyntax syntax) : syntax_(syntax) {
  absl::string_view rest = pattern;
  if (syntax.custom_verbs) {
    const auto slash = rest.rfind('/');
    const auto colon = rest.rfind(':');
    if (colon != absl::string_view::npos && (slash == absl::string_view::npos || colon > slash)) {
      verb_ = std::string(rest.substr(colon + 1));
      rest = rest.substr(0, colon);
      if (verb_.empty()) BadPattern(pattern, "empty custom verb");
    }
  }
  for (absl::string_view s : absl::StrSplit(rest, '/')) {
    if (s.empty()) BadPattern(pattern, "empty segment");
    if (!segments_.empty() && segments_.back().rest) BadPattern(pattern, "{name=**} must be the last segment");
    Segment seg;
    if (s.front() == '{') {
      if (s.back() != '}' || s.size() < 3) BadPattern(pattern, "a variable is {name} or {name=**}");
      absl::string_view name = s.substr(1, s.size() - 2);
      seg.rest = absl::ConsumeSuffix(&name, "=**");
      if (name.empty() || absl::StrContains(name, '=')) BadPattern(pattern, "a variable is {name} or {name=**}");
      seg.var = std::string(name);
    } else {
      seg.literal = std::string(s);
    }
    segments_.push_back(std::move(seg));
  }
}

bool PathPattern::Fits(const RequestPath& path) const {
  if (path.verb != verb_) return false;
  const auto& got = path.segments;
  size_t i = 0;
  for (const Segment& seg : segments_) {
    if (i >= got.size()) return false;
    if (seg.rest) return !(got.size() == i + 1 && got[i].empty());  // the rest, '/'s included, is not empty
    if (seg.var.empty() && got[i] != seg.literal) return false;
    ++i;
  }
  if (i == got.size()) return true;
  // One trailing '/' ("b/x/o/") when empty segments are kept.
  return !syntax_.ignore_empty_segments && i + 1 == got.size() && got[i].empty();
}

bool PathPattern::Match(const RequestPath& path, PathVars* vars) const {
  // A router tries its routes in turn: nothing is written for one that
  // does not fit.
  if (!Fits(path)) return false;
  const auto& got = path.segments;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& seg = segments_[i];
    if (seg.rest) {
      (*vars)[seg.var] = absl::StrJoin(got.begin() + static_cast<std::ptrdiff_t>(i), got.end(), "/");
    } else if (!seg.var.empty()) {
      (*vars)[seg.var] = got[i];
    }
  }
  return true;
}

}  // namespace mle::api
