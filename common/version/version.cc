#include "common/version/version.h"

namespace tae::version {

const char* Project() { return TAE_VERSION; }

}  // namespace tae::version
