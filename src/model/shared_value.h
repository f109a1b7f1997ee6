// An immutable value that copies of its holder share: copying a Job copies
// a pointer, not its Vertex AI spec (a job is copied at each hand-off:
// service, store, scheduler, executor; a deep copy per hand-off cost a
// Vertex create a tenth more CPU than an ml v1 one, bench/vertex_throughput.sh).
//
// Reads like std::optional<const T>: has_value, bool, *, ->, reset, and
// assigning a T or std::nullopt. It is never changed in place: to change it,
// assign a new value. Thread-safe as a const value is (the count of its
// sharers is atomic). Equal when both are empty or their values are equal.
#pragma once

#include <memory>
#include <optional>
#include <utility>

namespace mle::model {

template <typename T>
class SharedValue {
 public:
  SharedValue() = default;
  SharedValue(std::nullopt_t) {}  // NOLINT(google-explicit-constructor): reads as optional
  SharedValue(T value) : value_(std::make_shared<const T>(std::move(value))) {}  // NOLINT(google-explicit-constructor)
  SharedValue(std::optional<T> value) {  // NOLINT(google-explicit-constructor)
    if (value) value_ = std::make_shared<const T>(*std::move(value));
  }

  bool has_value() const { return value_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  const T& operator*() const { return *value_; }
  const T* operator->() const { return value_.get(); }
  void reset() { value_.reset(); }
  // A copy as a plain optional (for a wire or launch record that owns it).
  std::optional<T> Copy() const { return value_ ? std::optional<T>(*value_) : std::nullopt; }

  friend bool operator==(const SharedValue& a, const SharedValue& b) {
    if (a.value_ == b.value_) return true;
    return a.value_ != nullptr && b.value_ != nullptr && *a.value_ == *b.value_;
  }
  friend bool operator==(const SharedValue& a, const std::optional<T>& b) {
    return a.has_value() == b.has_value() && (!b || *a == *b);
  }

 private:
  std::shared_ptr<const T> value_;
};

}  // namespace mle::model
