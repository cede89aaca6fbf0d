#include "agent/train/threads.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>

namespace tae::train {
namespace {

TEST_CASE("thread count: train.threads, then TAE_THREADS, then the hardware", "[threads]") {
  CHECK(*ResolveThreadCount(3, "2") == 3);
  CHECK(*ResolveThreadCount(0, "2") == 2);
  CHECK(*ResolveThreadCount(0, nullptr) >= 1);
  CHECK_FALSE(ResolveThreadCount(0, "zero").ok());
  CHECK_FALSE(ResolveThreadCount(0, "0").ok());
  ConfigureThreads(1);
  CHECK(torch::get_num_threads() == 1);
}

}  // namespace
}  // namespace tae::train
