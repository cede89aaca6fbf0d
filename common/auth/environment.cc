#include "common/auth/environment.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vector>

extern char** environ;

namespace tae::auth {

void ScrubEnv(const std::string& name) {
  const std::string prefix = name + "=";
  std::vector<char*> found;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (strncmp(*entry, prefix.c_str(), prefix.size()) == 0) {
      found.push_back(*entry);
    }
  }
  ::unsetenv(name.c_str());  // out of the array first, so nothing points at what is zeroed
  for (char* text : found) {
    // The kernel's copy made at exec (what /proc/PID/environ shows) or one setenv allocated:
    // name and value zeroed either way.
    memset(text, 0, strlen(text));
  }
}

}  // namespace tae::auth
