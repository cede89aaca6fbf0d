#include "agent/train/distributed.h"

// This file alone is compiled with USE_C10D_GLOO (agent/train/CMakeLists.txt): Debian's
// libtorch exports ProcessGroupGloo, its header needs the define and libgloo-dev's headers.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tae::train {
namespace {

absl::StatusOr<int> ParseIntVar(const char* name, const char* value, int min, int max) {
  int parsed = 0;
  if (value == nullptr || *value == '\0') {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be set when TAE_WORLD_SIZE is above 1"));
  }
  if (!absl::SimpleAtoi(value, &parsed) || parsed < min || parsed > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=\"", value, "\" is not an integer in [", min, ", ", max, "]"));
  }
  return parsed;
}

// The local address of the interface that reaches `host` (a connected UDP socket sends nothing),
// or "" when it cannot be found. Gloo binds its pairs to this address.
std::string LocalAddressTowards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return "";
  }
  std::string local;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text)) != nullptr) {
      local = text;
    }
  }
  if (fd >= 0) {
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return local;
}

std::shared_ptr<::gloo::transport::Device> MakeDevice(const DistributedEnv& env) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname) {
    return ::c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  const std::string local = LocalAddressTowards(env.master_addr, env.master_port);
  if (!local.empty()) {
    return ::c10d::ProcessGroupGloo::createDeviceForHostname(local);
  }
  return ::c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

struct Collective::Impl {
  c10::intrusive_ptr<::c10d::Store> store;
  c10::intrusive_ptr<::c10d::ProcessGroupGloo> group;
  int64_t bytes_calls = 0;
};

absl::StatusOr<DistributedEnv> ParseDistributedEnv(
    const std::function<const char*(const char*)>& getenv) {
  DistributedEnv env;
  const char* world = getenv("TAE_WORLD_SIZE");
  if (world == nullptr || *world == '\0') {
    return env;
  }
  absl::StatusOr<int> world_size = ParseIntVar("TAE_WORLD_SIZE", world, 1, 1 << 16);
  if (!world_size.ok()) {
    return world_size.status();
  }
  env.world_size = *world_size;
  if (env.world_size == 1) {
    return env;
  }
  absl::StatusOr<int> rank = ParseIntVar("TAE_RANK", getenv("TAE_RANK"), 0, env.world_size - 1);
  if (!rank.ok()) {
    return rank.status();
  }
  env.rank = *rank;
  const char* addr = getenv("MASTER_ADDR");
  if (addr == nullptr || *addr == '\0') {
    return absl::InvalidArgumentError("MASTER_ADDR must be set when TAE_WORLD_SIZE is above 1");
  }
  env.master_addr = addr;
  absl::StatusOr<int> port = ParseIntVar("MASTER_PORT", getenv("MASTER_PORT"), 1, 65535);
  if (!port.ok()) {
    return port.status();
  }
  env.master_port = *port;
  return env;
}

absl::Status CheckShardable(int64_t batch_size, int world_size) {
  if (world_size > 1 && batch_size % world_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train.batch_size ", batch_size, " (the global batch) does not split evenly over ",
        world_size, " ranks (TAE_WORLD_SIZE): use a multiple of ", world_size));
  }
  return absl::OkStatus();
}

Collective::Collective(int rank, int world_size, std::unique_ptr<Impl> impl)
    : rank_(rank), world_size_(world_size), impl_(std::move(impl)) {}

Collective::~Collective() = default;

absl::StatusOr<std::unique_ptr<Collective>> Collective::Connect(const DistributedEnv& env,
                                                                std::chrono::milliseconds timeout) {
  const std::string where = absl::StrCat(env.master_addr, ":", env.master_port);
  auto impl = std::make_unique<Impl>();
  try {
    ::c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(env.master_port);
    options.isServer = env.rank == 0;
    options.numWorkers = static_cast<std::size_t>(env.world_size);
    options.waitWorkers = true;
    options.timeout = timeout;
    impl->store = c10::make_intrusive<::c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", env.rank, " of ", env.world_size, ": cannot ", env.rank == 0 ? "serve" : "reach",
        " the TCPStore at ", where, " (MASTER_ADDR:MASTER_PORT) within ", timeout.count() / 1000,
        " s: ", e.what()));
  }
  try {
    auto options = ::c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(MakeDevice(env));
    impl->group = c10::make_intrusive<::c10d::ProcessGroupGloo>(impl->store, env.rank,
                                                                env.world_size, options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rank ", env.rank, " of ", env.world_size,
                                               ": Gloo process group via ", where,
                                               " failed: ", e.what()));
  }
  return std::unique_ptr<Collective>(new Collective(env.rank, env.world_size, std::move(impl)));
}

void Collective::Broadcast(at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  impl_->group->broadcast(tensors, ::c10d::BroadcastOptions{})->wait();
}

void Collective::AllReduceSum(at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  impl_->group->allreduce(tensors, ::c10d::AllreduceOptions{})->wait();
}

void Collective::BroadcastBytes(std::string* bytes) {
  // Through the store: rank 0 sets a fresh key, the others wait for it (the store's timeout).
  const std::string key = absl::StrCat("tae/bytes/", impl_->bytes_calls++);
  if (rank_ == 0) {
    impl_->store->set(key, std::vector<uint8_t>(bytes->begin(), bytes->end()));
  } else {
    const std::vector<uint8_t> value = impl_->store->get(key);
    bytes->assign(value.begin(), value.end());
  }
}

}  // namespace tae::train
