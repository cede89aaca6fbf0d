#pragma once

// Where the programs find their data dir and each other.

#include <string>

namespace tae::cli {

// $TAE_HOME, else $XDG_DATA_HOME/tae, else ~/.local/share/tae.
std::string TaeHome();

// The directory of the running executable: taectl, taed, tae-agent and tae-train are installed
// side by side and find each other there. "." when it cannot be read.
std::string ProgramDir();

}  // namespace tae::cli
