// JobKey: a job's identity inside the scheduler (its project and id), the
// key of every table the scheduler keeps. Plain value; copy freely.
#pragma once

#include <compare>
#include <string>

namespace mle::scheduler {

struct JobKey {
  std::string project;
  std::string job_id;
  auto operator<=>(const JobKey&) const = default;
};

}  // namespace mle::scheduler
