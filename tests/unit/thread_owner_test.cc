// ThreadOwner: code written for one thread aborts when called from another.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "common/thread/owner.h"

namespace tae::thread {
namespace {

// Runs `f` in a forked child; returns the signal that ended it (0: it exited normally).
template <typename F>
int SignalOfChild(F&& f) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    signal(SIGABRT, SIG_DFL);  // the test framework's handler would report it as this test's
    f();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

}  // namespace

TEST_CASE("the first checked call binds the owner, and calls on its thread pass") {
  ThreadOwner owner;
  owner.Check("first");
  owner.Check("second");
  CHECK(SignalOfChild([&] {
          ThreadOwner fresh;
          fresh.Check("bind");
          fresh.Check("again");
        }) == 0);
}

TEST_CASE("a call from another thread aborts") {
  CHECK(SignalOfChild([] {
          ThreadOwner owner;
          owner.Check("on the owner");
          std::thread other([&] { owner.Check("off the owner"); });
          other.join();
        }) == SIGABRT);
}

TEST_CASE("released, the owner binds to the next thread that calls") {
  CHECK(SignalOfChild([] {
          ThreadOwner owner;
          std::thread first([&] { owner.Check("on the first thread"); });
          first.join();
          owner.Release();
          owner.Check("on the main thread, after release");
        }) == 0);
}

}  // namespace tae::thread
