// RouteTable: a router's routes as data, {HTTP method, path pattern, name,
// handler}, instead of a long function of nested ifs. The first route whose
// pattern and method fit a request answers it.
//
// A pattern is '/'-separated segments, each a literal ("jobs"), a variable
// ("{job}": one whole segment, percent-decoded) or, as the last segment,
// "{name=**}" (the rest of the path, '/' included, at least one character).
// With PathSyntax::custom_verbs the last segment may end in ":verb"
// (Google's custom methods, "jobs/{job}:cancel"); a pattern without a verb
// matches only requests without one.
//
// The route's name (the API method, e.g. "ml.projects.jobs.get") names the
// request in the access log and the request metrics.
//
// Immutable after construction; thread-safe.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/http_server.h"

namespace mle::api {

struct PathSyntax {
  // "...:verb" ends the last segment (split off before decoding, so an
  // encoded ':' stays part of an id).
  bool custom_verbs = false;
  // Empty segments ("a//b/") are dropped. Otherwise they are kept (an empty
  // variable is still a segment), and one trailing '/' after a whole match
  // is allowed.
  bool ignore_empty_segments = false;
};

// A request path split into percent-decoded segments, and its custom verb.
struct RequestPath {
  std::vector<std::string> segments;
  std::string verb;
};

// `raw_path` ("/v1/projects/p/jobs") split by `syntax`; INVALID_ARGUMENT when
// a segment is not correctly percent-encoded.
absl::StatusOr<RequestPath> SplitRequestPath(absl::string_view raw_path, PathSyntax syntax);

using PathVars = std::map<std::string, std::string, std::less<>>;

class PathPattern {
 public:
  // Patterns are constants of the code: a malformed one aborts at start-up
  // (with the pattern in the message), so every test finds it.
  PathPattern(absl::string_view pattern, PathSyntax syntax);

  // Whether `path` fits; then `vars` holds the variables' values (nothing
  // is written to it otherwise).
  bool Match(const RequestPath& path, PathVars* vars) const;

 private:
  // Whether `path` fits, its variables unread.
  bool Fits(const RequestPath& path) const;

  struct Segment {
    std::string literal;  // when var is empty
    std::string var;
    bool rest = false;  // {var=**}
  };
  std::vector<Segment> segments_;
  std::string verb_;
  PathSyntax syntax_;
};

// `respond`, naming `route` in every response it sends (HttpResponse::route).
Responder NameResponses(Responder respond, const std::string& route);

template <class Handler>
class RouteTable {
 public:
  struct Spec {
    std::string method;  // "GET", "POST", ...; "*" for any
    std::string pattern;
    std::string name;
    Handler handler;
  };
  struct Route {
    std::string method;
    PathPattern pattern;
    std::string name;
    Handler handler;
  };
  struct Found {
    const Route* route = nullptr;  // null: no route serves the request
    PathVars vars;
  };

  RouteTable(PathSyntax syntax, std::vector<Spec> specs) : syntax_(syntax) {
    for (auto& s : specs) routes_.push_back({s.method, PathPattern(s.pattern, syntax), s.name, std::move(s.handler)});
  }

  PathSyntax syntax() const { return syntax_; }

  Found Find(absl::string_view method, const RequestPath& path) const {
    Found found;
    for (const Route& r : routes_) {
      if (r.method != "*" && r.method != method) continue;
      if (!r.pattern.Match(path, &found.vars)) continue;  // writes nothing unless it fits
      found.route = &r;
      break;
    }
    return found;
  }

 private:
  PathSyntax syntax_;
  std::vector<Route> routes_;
};

}  // namespace mle::api
