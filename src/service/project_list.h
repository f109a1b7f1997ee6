// cloudresourcemanager.projects.list, without HTTP: the projects a caller
// may see, filtered, by id, in pages. Pure functions; thread-safe.
//
// The filter: terms "FIELD:VALUE" separated by spaces (and "AND"), all of
// which must hold; FIELD is name, id (or projectId) or lifecycleState, case
// insensitive like VALUE; a VALUE ending in '*' matches as a prefix ("*"
// alone: any). Other fields (labels., parent.) and OR/NOT are refused with
// INVALID_ARGUMENT naming them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/project.h"

namespace mle::service {

struct ListProjectsRequest {
  std::string filter;
  int32_t page_size = 0;  // 0 = the default (500); at most 1000
  std::string page_token;
};

struct ProjectPage {
  std::vector<model::Project> projects;  // by id
  std::string next_page_token;           // "" on the last page
};

// The page of `projects` (any order) that `visible` admits and the filter
// matches. INVALID_ARGUMENT naming the parameter for a filter, page size or
// token that is not acceptable.
absl::StatusOr<ProjectPage> ListProjectsPage(std::vector<model::Project> projects, const ListProjectsRequest& request,
                                             const std::function<bool(const model::Project&)>& visible);

}  // namespace mle::service
