#include "iam/principal.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mle::iam {

std::string Principal::Member() const {
  switch (kind) {
    case PrincipalKind::kOperator:
      return "operator";
    case PrincipalKind::kUser:
      return absl::StrCat("user:", email);
    case PrincipalKind::kServiceAccount:
      return absl::StrCat("serviceAccount:", email);
  }
  return "";
}

bool ValidEmail(absl::string_view email) {
  if (email.empty() || email.size() > 254) return false;
  const size_t at = email.find('@');
  if (at == absl::string_view::npos || at == 0 || email.find('@', at + 1) != absl::string_view::npos) return false;
  const absl::string_view local = email.substr(0, at);
  const absl::string_view domain = email.substr(at + 1);
  if (local.size() > 64) return false;
  for (char c : local) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' && c != '+') {
      return false;
    }
  }
  if (domain.find('.') == absl::string_view::npos) return false;
  for (absl::string_view label : absl::StrSplit(domain, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> CanonicalMember(absl::string_view member) {
  if (member == kAllAuthenticatedUsers) return std::string(member);
  if (member == "allUsers") {
    return absl::InvalidArgumentError(
        "allUsers cannot be granted: mlengine serves only callers with a token. Use allAuthenticatedUsers for "
        "every caller with a valid token.");
  }
  for (absl::string_view prefix : {"user:", "serviceAccount:"}) {
    if (!absl::StartsWith(member, prefix)) continue;
    const std::string email = absl::AsciiStrToLower(member.substr(prefix.size()));
    if (!ValidEmail(email)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Member \"", member, "\" does not name a valid email address after \"", prefix, "\"."));
    }
    return absl::StrCat(prefix, email);
  }
  const size_t colon = member.find(':');
  if (colon != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Member \"", member, "\" is of type \"", member.substr(0, colon),
        "\", which mlengine does not have. Members are user:EMAIL, serviceAccount:EMAIL or allAuthenticatedUsers."));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Member \"", member,
                   "\" is not of the form TYPE:EMAIL. Members are user:EMAIL, serviceAccount:EMAIL or "
                   "allAuthenticatedUsers."));
}

std::optional<Principal> PrincipalOfMember(absl::string_view member) {
  if (absl::StartsWith(member, "user:")) return Principal::User(std::string(member.substr(5)));
  if (absl::StartsWith(member, "serviceAccount:")) return Principal::ServiceAccount(std::string(member.substr(15)));
  return std::nullopt;
}

}  // namespace mle::iam
