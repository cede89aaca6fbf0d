#pragma once

// The agent link's size limits (agent_link.proto), both sides in one place. An agent stays
// within the first of each pair; taed refuses a batch beyond the second, naming the field. The
// gap leaves room for agents of another build, never the other way round.

#include <cstddef>

namespace tae::v1 {

// Events in one EventBatch.
inline constexpr int kAgentEventsPerBatch = 2000;
inline constexpr int kTaedMaxEventsPerBatch = 20000;
// Bytes of one AgentMessage's events (the agent sends a batch as several messages past this) and
// of the largest message taed's agent server receives (daemon.cc): 2,000 events of metadata at
// 256 KiB each would be 500 MiB, which taed refused, and the agent sent again forever.
inline constexpr size_t kAgentBatchBytes = 8u << 20;
inline constexpr size_t kTaedMaxMessageBytes = 64u << 20;
// Bytes of one log line (a longer line is cut by the agent) and of an exit reason.
inline constexpr size_t kAgentMaxLogLine = 16 * 1024;
inline constexpr size_t kTaedMaxLogText = 64 * 1024;

// How long one Connect stream lives. Every message on a stream is checked against the agent's
// credential as it is now; after this long taed also ends the stream at its next message (the
// agent reconnects and registers again, with a fresh check of its credential).
inline constexpr double kTaedStreamLifetimeS = 6 * 3600;

static_assert(kAgentEventsPerBatch <= kTaedMaxEventsPerBatch);
static_assert(kAgentMaxLogLine <= kTaedMaxLogText);
// The largest event (a metadata event: 256 facts of 1 KiB and their keys) fits a batch's room.
static_assert(kAgentBatchBytes * 4 <= kTaedMaxMessageBytes);

}  // namespace tae::v1
