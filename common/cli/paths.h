#pragma once

// Where the programs find their data dir and each other, and the one rule for a path taken from a
// user or the environment: it is made absolute where it enters (a flag, a variable, a file name
// on the command line), so every child (taed, agents, supervisors, jobs), which may run in another
// directory, gets the same file.

#include <string>

namespace tae::cli {

// `path` made absolute against the current directory, without "." components, repeated or
// trailing '/'; ".." is kept (a symlink's ".." is the kernel's to resolve) and symlinks are not
// followed. "" stays "" (not set).
std::string AbsolutePath(const std::string& path);

// $TAE_HOME, else $XDG_DATA_HOME/tae, else ~/.local/share/tae; absolute (AbsolutePath).
std::string TaeHome();

// The directory of the running executable: taectl, taed, tae-agent and tae-train are installed
// side by side and find each other there. "." when it cannot be read.
std::string ProgramDir();

}  // namespace tae::cli
