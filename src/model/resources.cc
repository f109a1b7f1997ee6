#include "model/resources.h"

#include "absl/strings/str_cat.h"

namespace mle::model {

std::string ReplicaDemand::TaskName() const { return absl::StrCat(role, "-replica-", index); }

}  // namespace mle::model
