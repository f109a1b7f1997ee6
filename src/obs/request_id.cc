#include "obs/request_id.h"

#include <random>

#include "absl/strings/ascii.h"

namespace mle::obs {
namespace {

thread_local std::string current_request_id;

}  // namespace

std::string NewRequestId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t bits = rng();
  std::string id(16, '0');
  for (char& c : id) {
    c = kHex[bits & 0xf];
    bits >>= 4;
  }
  return id;
}

bool IsAcceptableRequestId(absl::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
                    c == '=' || c == '+' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string AcceptRequestId(absl::string_view incoming) {
  return IsAcceptableRequestId(incoming) ? std::string(incoming) : NewRequestId();
}

const std::string& CurrentRequestId() { return current_request_id; }

ScopedRequestId::ScopedRequestId(std::string id) : previous_(std::move(current_request_id)) {
  current_request_id = std::move(id);
}

ScopedRequestId::~ScopedRequestId() { current_request_id = std::move(previous_); }

}  // namespace mle::obs
