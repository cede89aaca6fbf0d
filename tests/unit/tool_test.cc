#include "common/process/tool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace tae::process {
namespace {

TEST_CASE("tool: RunTool captures output and gives up on a tool that hangs") {
  ToolResult echo = RunTool({"/bin/sh", "-c", "echo hello"}, 5000);
  CHECK(echo.ok);
  CHECK(echo.out == "hello\n");
  ToolResult failing = RunTool({"/bin/sh", "-c", "exit 3"}, 5000);
  CHECK_FALSE(failing.ok);
  CHECK(failing.error == "exited with status 3");
  ToolResult missing = RunTool({"/nonexistent/tool"}, 5000);
  CHECK_FALSE(missing.ok);
  const auto start = std::chrono::steady_clock::now();
  ToolResult hung = RunTool({"/bin/sh", "-c", "sleep 30"}, 200);
  CHECK_FALSE(hung.ok);
  CHECK(hung.error == "gave no answer within 200 ms");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

// What tae-agent's Runner does on every SIGCHLD, waitpid(-1), must never reap a tool or its
// helper: the helper reaped here would leave RunTool without the tool's status, and the tool (its
// pid is what it prints) is never this process's child. Children other tests left may be reaped
// here, so only those two are looked for. The tool thread leaves its signal mask alone: RunTool
// must not need it blocked.
TEST_CASE("tool: RunTool runs a tool beside a waitpid(-1) reaper without being reaped by it") {
  std::atomic<bool> done = false;
  ToolResult out;
  std::thread tool([&] {
    out = RunTool({"/bin/sh", "-c", "sleep 0.2; echo $$"}, 5000);
    done = true;
  });
  // What the Runner does on SIGCHLD, as fast as it can.
  std::vector<pid_t> reaped;
  while (!done) {
    pid_t pid = waitpid(-1, nullptr, WNOHANG);
    if (pid > 0) {
      reaped.push_back(pid);
    }
    std::this_thread::yield();
  }
  tool.join();
  REQUIRE(out.ok);
  CHECK(out.error.empty());
  const pid_t tool_pid = static_cast<pid_t>(std::stol(out.out));
  CHECK(tool_pid > 0);
  CHECK(std::find(reaped.begin(), reaped.end(), tool_pid) == reaped.end());
}

TEST_CASE("tool: FindOnPath finds an executable on PATH, and nothing else") {
  CHECK(FindOnPath("sh").size() > 3);
  CHECK(FindOnPath("sh").substr(FindOnPath("sh").size() - 3) == "/sh");
  CHECK(FindOnPath("no-such-tool-anywhere").empty());
}

}  // namespace
}  // namespace tae::process
