#pragma once

// One function per taectl verb. Each parses its own flags, talks to taed through ControlClient,
// prints a table (or JSON with --json) and returns the process exit code.

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tae::client {

using Args = std::vector<std::string>;

struct CommandEnv {
  std::string home;        // $TAE_HOME
  std::string binary_dir;  // where taed / tae-agent live (next to taectl)
};

int Up(const CommandEnv& env, const Args& args);
int Down(const CommandEnv& env, const Args& args);
int Submit(const CommandEnv& env, const Args& args);
int Wait(const CommandEnv& env, const Args& args);
int Ls(const CommandEnv& env, const Args& args);
int Show(const CommandEnv& env, const Args& args);
int Runs(const CommandEnv& env, const Args& args);
int Logs(const CommandEnv& env, const Args& args);
int Report(const CommandEnv& env, const Args& args);
int Cancel(const CommandEnv& env, const Args& args);
int Agents(const CommandEnv& env, const Args& args);
int Heads(const CommandEnv& env, const Args& args);
int Compare(const CommandEnv& env, const Args& args);
int Pause(const CommandEnv& env, const Args& args);
int Resume(const CommandEnv& env, const Args& args);
int Retry(const CommandEnv& env, const Args& args);
int Queue(const CommandEnv& env, const Args& args);
// taectl agents drain|undrain ID
int DrainAgent(const CommandEnv& env, const std::string& agent_id, bool drain);
int RevokeAgent(const CommandEnv& env, const std::string& agent_id, const std::string& reason,
                bool json);
int Plot(const CommandEnv& env, const Args& args);
int Export(const CommandEnv& env, const Args& args);
int Mount(const CommandEnv& env, const Args& args);
int Snapshots(const CommandEnv& env, const Args& args);
int Scrap(const CommandEnv& env, const Args& args);
int Checkpoints(const CommandEnv& env, const Args& args);
int Pull(const CommandEnv& env, const Args& args);
int Profile(const CommandEnv& env, const Args& args);
int Artifacts(const CommandEnv& env, const Args& args);
int Run(const CommandEnv& env, const Args& args);
int Sync(const CommandEnv& env, const Args& args);
// taectl ui: the dashboard's sign-in URL (--open opens it).
int Ui(const CommandEnv& env, const Args& args);
// taectl doctor: checks this machine and every agent; 1 when any check fails.
int Doctor(const CommandEnv& env, const Args& args);

// Prints "taectl: <message>" to stderr; returns 2 for bad input, 1 otherwise.
int Fail(const absl::Status& status);

}  // namespace tae::client
