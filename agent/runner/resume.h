#pragma once

// {resume:TEXT} in a command job's command (docs/checkpoints.md, "Resume flags"): the spec keeps
// the placeholder as it is when it expands the command at submit (common/spec/spec.h,
// ExpandCommand), and the agent resolves it when it starts an attempt: TEXT where the attempt
// starts from a checkpoint restored into TAE_CHECKPOINT_DIR, nothing otherwise. TEXT is shell
// text as written (no placeholder inside it; it ends at the first '}'). Pure.

#include <string>
#include <string_view>

namespace tae::agent {

std::string ResolveResume(std::string_view command, bool resumed);

}  // namespace tae::agent
