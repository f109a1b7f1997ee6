#include "common/clock.h"

namespace mle::common {

RealClock& RealClock::Get() {
  static RealClock* clock = new RealClock();
  return *clock;
}

}  // namespace mle::common
