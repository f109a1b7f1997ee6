// Request ids: the id of the HTTP request a thread is serving, so that every
// log line written while serving it names it (obs/log.h reads it), and the
// id travels with the work the request hands to other threads.
//
// The HTTP server picks the id (a client's X-Request-Id when it is
// acceptable, else a fresh one), sets it around the handler with
// ScopedRequestId, and returns it in the response. Code that continues a
// request on another thread wraps its callback with BindRequestId.
//
// Thread-safe: the current id is per thread.
#pragma once

#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace mle::obs {

// A fresh id: 16 lowercase hex digits (64 random bits), unique enough to
// find one request's lines among a server's.
std::string NewRequestId();

// Whether a client's id may be used as ours: 1 to 128 characters of letters,
// digits and . _ : = + / - (a UUID, a trace id, a ULID): nothing that could
// break a log line or a header.
bool IsAcceptableRequestId(absl::string_view id);

// `incoming` when acceptable, else a fresh id.
std::string AcceptRequestId(absl::string_view incoming);

// The id of the request this thread is serving; "" when none.
const std::string& CurrentRequestId();

// Makes `id` this thread's current request id until destroyed (then the
// previous one again). Not movable: it lives in one scope of one thread.
class ScopedRequestId {
 public:
  explicit ScopedRequestId(std::string id);
  ~ScopedRequestId();
  ScopedRequestId(const ScopedRequestId&) = delete;
  ScopedRequestId& operator=(const ScopedRequestId&) = delete;

 private:
  std::string previous_;
};

// `fn` made to run under the request id current now (possibly none), on
// whichever thread later calls it.
template <class Fn>
auto BindRequestId(Fn fn) {
  return [id = CurrentRequestId(), fn = std::move(fn)](auto&&... args) mutable {
    ScopedRequestId scope(id);
    return fn(std::forward<decltype(args)>(args)...);
  };
}

}  // namespace mle::obs
