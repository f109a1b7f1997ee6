// ConsoleEndpoint: the web console's static files under /console/, read
// from one flat directory (the front end's build output; docs/console.md).
//
//   /console              301 to /console/ (the query kept)
//   /console/, /console/index.html
//                         index.html, Cache-Control: no-cache
//   /console/NAME         the file NAME of the directory, cached for a year
//                         (every name but index.html carries a content hash)
//
// NAME is [A-Za-z0-9][A-Za-z0-9._-]* without "..": nothing percent-encoded,
// no '/', no dotfile. The file is opened with O_NOFOLLOW and served only if
// it is a regular file, so neither a symlink nor a directory ever leaves the
// directory. Anything else is 404 with a short plain-text body. GET and HEAD
// only (405 otherwise). Every response, errors and redirects included,
// carries the console's security headers (a strict Content-Security-Policy,
// nosniff, no framing, no referrer).
//
// No authentication: the files hold no data; the console signs in with a
// bearer token against the API. The directory is looked at on each request,
// so a console built after mlengined started is served at once.
//
// Thread-safe (immutable).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "api/http_server.h"

namespace mle::api {

class ConsoleEndpoint {
 public:
  // `dir`: the directory of the console's files; "" disables the console
  // (every /console path is then 404, saying so).
  explicit ConsoleEndpoint(std::string dir) : dir_(std::move(dir)) {}

  // Whether `target` is "/console" or under "/console/" (with or without a query).
  static bool Serves(absl::string_view target);

  void Handle(HttpRequest request, Responder respond) const;

  // One line for the server's log: where the console is served from, or why not.
  std::string Describe() const;

  // The headers every console response carries.
  static const std::vector<std::pair<std::string, std::string>>& SecurityHeaders();
  // The Content-Type served for a file name, by its extension.
  static std::string ContentTypeOf(absl::string_view name);
  // Whether `name` may name a file of the directory (see above).
  static bool ValidName(absl::string_view name);

 private:
  const std::string dir_;
};

}  // namespace mle::api
