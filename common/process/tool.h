#pragma once

// Short-lived tools (nvidia-smi, tpu-info, gcloud, python3 -c ...): find one on $PATH, run it with
// a timeout and take its stdout. Used by the machine facts (common/host), tae-agent's accelerator
// probe and taectl doctor. Jobs and agents are started with Spawn (spawn.h) instead: they outlive
// the call and are reaped by their owner.

#include <string>
#include <vector>

namespace tae::process {

// A short-lived tool's stdout, when it exited 0; else why not (error).
struct ToolResult {
  bool ok = false;
  std::string out;
  std::string error;
};
// The executable `name` in $PATH, or "".
std::string FindOnPath(const std::string& name);
// Runs argv (argv[0] a path, no $PATH search) in a process group of its own, stdout captured (the
// first MiB), stdin and stderr /dev/null; SIGKILLs the group after timeout_ms. A tool killed by
// signal N "exited with status" 128 + N. Blocks for up to timeout_ms and about a second more.
//
// It runs beside a waitpid(-1) reaper (tae-agent's Runner, on every SIGCHLD) without a race. A
// fork()ed tool could be reaped there first: its status lost, and our waitpid(pid) could then
// wait on an unrelated child that reused the pid (a new tae-job). So the tool runs under a helper
// started by clone() with exit signal 0, a "clone child": it sends no SIGCHLD and waitpid(-1)
// without __WCLONE/__WALL never returns it; only RunTool's waitpid(helper, __WCLONE) does. The
// helper must not exec (exec resets the exit signal to SIGCHLD): it vforks the tool, waits and
// exits with its status, so the tool is never the caller's child. A tool (or something it left)
// that outlives the helper goes to the nearest subreaper, in tae-agent the agent, as an ordinary
// child: the Runner reaps it and ignores its pid; RunTool never waits on it.
//
// Callers guarantee only that (1) nothing in the process waits for any child (pid -1, 0 or a
// group) with __WCLONE or __WALL, and (2) they are not on a thread that must stay responsive
// (tae-agent's io thread). No signal mask is needed: RunTool blocks every signal around clone and
// the helper resets every handler to SIG_DFL before unblocking, so no handler of the caller's runs
// in the child; the caller's own signals are only deferred for that moment, and EINTR is retried.
// So any thread may call it, before or after a reaper starts, concurrently too: taectl doctor,
// Gather in Agent::Start and AcceleratorProbe's thread.
ToolResult RunTool(std::vector<std::string> argv, int timeout_ms);

}  // namespace tae::process
