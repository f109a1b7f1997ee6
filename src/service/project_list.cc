#include "service/project_list.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace mle::service {
namespace {

constexpr int32_t kDefaultPageSize = 500;
constexpr int32_t kMaxPageSize = 1000;
constexpr absl::string_view kTokenPrefix = "after:";

// One "FIELD:VALUE" term, both lower-cased.
struct Term {
  enum class Field { kId, kLifecycleState } field;
  std::string value;  // without a trailing '*'
  bool prefix = false;
};

absl::Status BadFilter(const std::string& why) {
  return common::InvalidArgumentWithViolations("Invalid filter.", {{"filter", why}});
}

absl::StatusOr<std::vector<Term>> ParseFilter(absl::string_view filter) {
  std::vector<Term> terms;
  for (absl::string_view word : absl::StrSplit(filter, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    if (word == "AND") continue;
    const size_t colon = word.find_first_of(":=");
    if (word == "OR" || word == "NOT" || colon == absl::string_view::npos) {
      return BadFilter(absl::StrCat("unsupported filter term \"", word,
                                    "\": mlengine supports terms FIELD:VALUE (all must hold) on name, id and "
                                    "lifecycleState"));
    }
    const std::string field = absl::AsciiStrToLower(word.substr(0, colon));
    Term term;
    if (field == "name" || field == "id" || field == "projectid") {
      term.field = Term::Field::kId;
    } else if (field == "lifecyclestate") {
      term.field = Term::Field::kLifecycleState;
    } else {
      return BadFilter(absl::StrCat("unsupported filter field \"", word.substr(0, colon),
                                    "\": mlengine filters projects on name, id and lifecycleState"));
    }
    term.value = absl::AsciiStrToLower(word.substr(colon + 1));
    if (absl::EndsWith(term.value, "*")) {
      term.value.pop_back();
      term.prefix = true;
    }
    terms.push_back(std::move(term));
  }
  return terms;
}

bool Matches(const model::Project& p, const std::vector<Term>& terms) {
  for (const Term& t : terms) {
    // Every project mlengine knows is ACTIVE (none is ever deleted).
    const std::string actual = t.field == Term::Field::kId ? absl::AsciiStrToLower(p.id) : "active";
    if (t.prefix ? !absl::StartsWith(actual, t.value) : actual != t.value) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<ProjectPage> ListProjectsPage(std::vector<model::Project> projects, const ListProjectsRequest& request,
                                             const std::function<bool(const model::Project&)>& visible) {
  auto terms = ParseFilter(request.filter);
  if (!terms.ok()) return terms.status();
  if (request.page_size < 0 || request.page_size > kMaxPageSize) {
    return common::InvalidArgumentWithViolations(
        "Invalid page size.", {{"pageSize", absl::StrCat("must be from 0 to ", kMaxPageSize)}});
  }
  const size_t page_size = request.page_size == 0 ? kDefaultPageSize : request.page_size;
  std::string after;
  if (!request.page_token.empty()) {
    std::string decoded;
    if (!absl::WebSafeBase64Unescape(request.page_token, &decoded) || !absl::StartsWith(decoded, kTokenPrefix)) {
      return common::InvalidArgumentWithViolations(
          "Invalid page token.", {{"pageToken", "not a token this method returned"}});
    }
    after = decoded.substr(kTokenPrefix.size());
  }
  std::sort(projects.begin(), projects.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  ProjectPage page;
  for (auto& p : projects) {
    if (!after.empty() && p.id <= after) continue;
    if (!Matches(p, *terms) || !visible(p)) continue;
    if (page.projects.size() == page_size) {
      page.next_page_token = absl::WebSafeBase64Escape(absl::StrCat(kTokenPrefix, page.projects.back().id));
      break;
    }
    page.projects.push_back(std::move(p));
  }
  return page;
}

}  // namespace mle::service
