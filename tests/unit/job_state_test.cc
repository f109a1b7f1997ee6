#include "model/job_state.h"

#include <gtest/gtest.h>

namespace mle::model {
namespace {

using S = JobState;

// The full transition table, as data: every pair not listed must be refused.
struct Edge { S from, to; bool allowed; };

TEST(JobStateTest, TransitionTable) {
  const S all[] = {S::kUnspecified, S::kQueued, S::kPreparing, S::kRunning, S::kSucceeded,
                   S::kFailed, S::kCancelling, S::kCancelled};
  const std::vector<std::pair<S, S>> allowed = {
      {S::kUnspecified, S::kQueued}, {S::kQueued, S::kPreparing}, {S::kQueued, S::kFailed},
      {S::kQueued, S::kCancelling}, {S::kPreparing, S::kRunning}, {S::kPreparing, S::kFailed},
      {S::kPreparing, S::kCancelling}, {S::kPreparing, S::kQueued}, {S::kRunning, S::kSucceeded},
      {S::kRunning, S::kFailed}, {S::kRunning, S::kCancelling}, {S::kRunning, S::kQueued},
      {S::kCancelling, S::kCancelled}, {S::kCancelling, S::kFailed}, {S::kCancelling, S::kSucceeded}};
  for (S from : all) {
    for (S to : all) {
      bool expected = std::find(allowed.begin(), allowed.end(), std::make_pair(from, to)) != allowed.end();
      EXPECT_EQ(CanTransition(from, to), expected)
          << JobStateName(from) << " -> " << JobStateName(to);
    }
  }
}

TEST(JobStateTest, TerminalStatesHaveNoWayOut) {
  for (S t : {S::kSucceeded, S::kFailed, S::kCancelled}) {
    EXPECT_TRUE(IsTerminal(t));
    EXPECT_FALSE(IsCancellable(t));
    for (S to : {S::kQueued, S::kPreparing, S::kRunning, S::kCancelling}) EXPECT_FALSE(CanTransition(t, to));
  }
}

TEST(JobStateTest, CancellableStates) {
  EXPECT_TRUE(IsCancellable(S::kQueued));
  EXPECT_TRUE(IsCancellable(S::kPreparing));
  EXPECT_TRUE(IsCancellable(S::kRunning));
  EXPECT_FALSE(IsCancellable(S::kCancelling));
}

TEST(JobStateTest, NamesRoundTrip) {
  for (S s : {S::kQueued, S::kPreparing, S::kRunning, S::kSucceeded, S::kFailed, S::kCancelling, S::kCancelled}) {
    EXPECT_EQ(ParseJobState(JobStateName(s)), s);
  }
  EXPECT_EQ(ParseJobState("RUNNNING"), std::nullopt);
}

}  // namespace
}  // namespace mle::model
