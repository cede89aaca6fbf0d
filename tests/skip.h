#pragma once

// A test whose prerequisite is missing here (root, network namespaces, gcloud, sshd, openssl,
// python3-torch) ends with TAE_SKIP(reason) instead of passing quietly. The marker it prints
// makes ctest report the test as skipped (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt), and
// deploy/test.sh lists every skipped test with its reason after the run. Use it only at the top
// level of a TEST_CASE or SECTION body: it returns from the enclosing function.

#include <catch2/catch.hpp>

#define TAE_SKIP_MARKER "TAE-SKIPPED: "

#define TAE_SKIP(reason)             \
  do {                               \
    WARN(TAE_SKIP_MARKER << reason); \
    return;                          \
  } while (false)
