#pragma once

// The project version, once: what every TAE binary reports (taectl --version, taectl doctor, an
// agent's registration and facts, the dashboard). It is CMake's PROJECT_VERSION, set in the
// top-level CMakeLists.txt; nothing else spells it.

namespace tae::version {

// The version this binary was built as, "MAJOR.MINOR.PATCH".
const char* Project();

}  // namespace tae::version
