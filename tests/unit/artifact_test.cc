#include "proto/tae/v1/artifact.h"

#include <catch2/catch.hpp>
#include <string>

namespace tae::v1 {
namespace {

TEST_CASE("an artifact name is 1-64 of [A-Za-z0-9._-], not starting with a dot") {
  CHECK(IsArtifactName("profile-p3f9a2c"));
  CHECK(IsArtifactName("profile-step120"));
  CHECK(IsArtifactName("a.b_c-D9"));
  CHECK(IsArtifactName(std::string(64, 'x')));
  CHECK_FALSE(IsArtifactName(""));
  CHECK_FALSE(IsArtifactName(std::string(65, 'x')));
  CHECK_FALSE(IsArtifactName(".hidden"));
  CHECK_FALSE(IsArtifactName(".."));
  CHECK_FALSE(IsArtifactName("a/b"));
  CHECK_FALSE(IsArtifactName("a b"));
  CHECK_FALSE(IsArtifactName("caf\xc3\xa9"));
}

}  // namespace
}  // namespace tae::v1
