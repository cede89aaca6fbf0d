#pragma once

// The names of the run and agent states (types.proto's RunState and AgentState) as people and
// scripts see them: lowercase words ("queued", "succeeded", "draining"), the same words taed
// stores (server/store/records.cc; tests/unit/convert_test.cc holds the two equal) and
// `taectl ... --json` prints.

#include <string_view>

#include "tae/v1/types.pb.h"

namespace tae::v1 {

inline const char* StateName(RunState state) {
  switch (state) {
    case RUN_STATE_QUEUED:
      return "queued";
    case RUN_STATE_ASSIGNED:
      return "assigned";
    case RUN_STATE_RUNNING:
      return "running";
    case RUN_STATE_SUCCEEDED:
      return "succeeded";
    case RUN_STATE_FAILED:
      return "failed";
    case RUN_STATE_CANCELLED:
      return "cancelled";
    case RUN_STATE_LOST:
      return "lost";
    case RUN_STATE_PRUNED:
      return "pruned";
    default:
      return "unknown";
  }
}

inline const char* StateName(AgentState state) {
  switch (state) {
    case AGENT_STATE_READY:
      return "ready";
    case AGENT_STATE_BUSY:
      return "busy";
    case AGENT_STATE_DRAINING:
      return "draining";
    case AGENT_STATE_LOST:
      return "lost";
    case AGENT_STATE_REVOKED:
      return "revoked";
    default:
      return "unknown";
  }
}

// succeeded, failed, cancelled or pruned: the run will not change again (lost is requeued or
// failed).
inline bool IsFinal(RunState state) {
  return state == RUN_STATE_SUCCEEDED || state == RUN_STATE_FAILED ||
         state == RUN_STATE_CANCELLED || state == RUN_STATE_PRUNED;
}

}  // namespace tae::v1
