// Sizes for people: "512 B", "12.0 MiB", "1.5 GiB". Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace mle::common {

std::string HumanBytes(int64_t n);

}  // namespace mle::common
