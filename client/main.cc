#include <malloc.h>
// taectl: the researcher's CLI over taed's Control API.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "client/commands/commands.h"
#include "common/cli/paths.h"
#include "common/version/version.h"

namespace {

struct Verb {
  const char* name;
  int (*run)(const tae::client::CommandEnv&, const tae::client::Args&);
  const char* summary;
};

constexpr Verb kVerbs[] = {
    {"up", tae::client::Up, "start taed in the background with local agents"},
    {"down", tae::client::Down, "stop taed and its local agents"},
    {"submit", tae::client::Submit, "submit an experiment file (--wait to follow it)"},
    {"wait", tae::client::Wait, "follow an experiment until every run is final"},
    {"ls", tae::client::Ls, "list experiments"},
    {"show", tae::client::Show, "show an experiment or a run (r<ID>)"},
    {"runs", tae::client::Runs, "list the runs of an experiment"},
    {"logs", tae::client::Logs, "print a run's output (-f to follow)"},
    {"report", tae::client::Report, "the ablation table of an experiment"},
    {"plot", tae::client::Plot, "metric curves of an experiment as an SVG figure"},
    {"export", tae::client::Export, "every metric point as CSV / JSON, or TensorBoard files"},
    {"heads", tae::client::Heads, "head importance grids of a run (train.head_importance)"},
    {"compare", tae::client::Compare, "config and metric differences between runs"},
    {"pause", tae::client::Pause, "keep an experiment's queued runs from starting"},
    {"resume", tae::client::Resume, "let a paused experiment's runs start again"},
    {"retry", tae::client::Retry, "requeue an experiment's failed, cancelled and lost runs"},
    {"queue", tae::client::Queue, "queued runs and why each waits"},
    {"cancel", tae::client::Cancel, "cancel a run or an experiment"},
    {"agents", tae::client::Agents, "list agents"},
    {"ui", tae::client::Ui, "the web dashboard's URL (--open opens it)"},
    {"doctor", tae::client::Doctor, "check this machine and every agent before a long run"},
    {"mount", tae::client::Mount, "snapshot a code directory (uploads only what taed lacks)"},
    {"run", tae::client::Run, "mount a directory and run a command in it on an agent"},
    {"sync", tae::client::Sync, "run a command again on every change of a directory (--watch)"},
    {"snapshots", tae::client::Snapshots, "list code snapshots"},
    {"scrap", tae::client::Scrap,
     "remove code snapshots (or --checkpoints, --artifacts) from taed"},
    {"checkpoints", tae::client::Checkpoints, "list the checkpoints a run uploaded"},
    {"pull", tae::client::Pull, "fetch a run's checkpoint (or --artifact) into a directory"},
    {"profile", tae::client::Profile, "capture a profile of a running run and summarise it"},
    {"artifacts", tae::client::Artifacts, "list the artifacts (profiles) runs stored"},
};

void Usage(std::FILE* out) {
  std::fprintf(out,
               "usage: taectl [--home DIR] COMMAND [ARGS]\n       taectl --version\n\n"
               "Runs Transformer ablation studies through taed. Data lives in $TAE_HOME\n"
               "(default ~/.local/share/tae). `taectl COMMAND --help` explains each command.\n\n"
               "Commands:\n");
  for (const Verb& verb : kVerbs) {
    std::fprintf(out, "  %-8s %s\n", verb.name, verb.summary);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Grow the heap in 64 MiB steps: each growth takes the process's memory-map lock for writing,
  // which stalls the other thread of a parallel tree walk (a re-mount's walk: 19 -> 12 ms).
  mallopt(M_TOP_PAD, 64 << 20);
  tae::client::CommandEnv env;
  env.home = tae::cli::TaeHome();
  env.binary_dir = tae::cli::ProgramDir();
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--home" && i + 1 < argc) {
      env.home = tae::cli::AbsolutePath(argv[++i]);
    } else if (arg.rfind("--home=", 0) == 0) {
      env.home = tae::cli::AbsolutePath(arg.substr(7));
    } else if (arg == "--version") {
      std::printf("taectl %s\n", tae::version::Project());
      return 0;
    } else if (arg == "-h" || arg == "--help" || arg == "help") {
      Usage(stdout);
      return 0;
    } else {
      break;
    }
  }
  if (i >= argc) {
    Usage(stderr);
    return 2;
  }
  std::string command = argv[i];
  tae::client::Args args(argv + i + 1, argv + argc);
  for (const Verb& verb : kVerbs) {
    if (command == verb.name) {
      const int code = verb.run(env, args);
      // Nothing is left to clean up: skip the libraries' exit-time teardown (gRPC's alone costs
      // milliseconds, a noticeable share of a quick command).
      std::fflush(nullptr);
      std::_Exit(code);
    }
  }
  std::fprintf(stderr, "taectl: unknown command '%s'\n\n", command.c_str());
  Usage(stderr);
  return 2;
}
