#include "agent/train/runtime_info.h"

#include <catch2/catch.hpp>
#include <map>

#include "agent/train/threads.h"

namespace tae::train {
namespace {

TEST_CASE("runtime metadata names libtorch, the BLAS library and the thread pools", "[threads]") {
  ConfigureThreads(1);
  const auto entries = RuntimeMetadata();
  REQUIRE(entries.size() >= 5);
  CHECK(entries[0].first == "libtorch");
  const std::map<std::string, std::string> meta(entries.begin(), entries.end());
  CHECK(meta.size() == entries.size());  // no key twice
  CHECK(meta.at("libtorch").find('.') != std::string::npos);
  CHECK_FALSE(meta.at("blas").empty());
  CHECK(meta.at("threads") == "1");
  CHECK(meta.at("interop_threads") == "1");
  CHECK_FALSE(meta.at("omp_wait_policy").empty());
}

}  // namespace
}  // namespace tae::train
