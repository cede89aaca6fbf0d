// The gcloud-tpu provider's pools file and the gcloud command lines built from it.
#include "server/provider/tpu_pools.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "server/provider/ssh_hosts.h"

namespace tae::provider {
namespace {

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<std::vector<TpuPool>> pools = ParseTpuPools(text, "pools.toml");
  REQUIRE_FALSE(pools.ok());
  return std::string(pools.status().message());
}

}  // namespace

TEST_CASE("a pool file parses into pools with defaults and the pool label", "[provider]") {
  absl::StatusOr<std::vector<TpuPool>> pools = ParseTpuPools(
      "[[pool]]\nname = \"v4\"\naccelerator_type = \"v4-8\"\nzones = [\"us-central2-b\", "
      "\"us-east5-a\"]\nspot = true\nmax_vms = 2\nidle_timeout_s = 30\nproject = \"p\"\n"
      "labels = { accelerator = \"tpu\" }\n",
      "pools.toml");
  REQUIRE(pools.ok());
  REQUIRE(pools->size() == 1);
  const TpuPool& pool = (*pools)[0];
  CHECK(pool.zones == std::vector<std::string>{"us-central2-b", "us-east5-a"});
  CHECK(pool.runtime_version == "tpu-ubuntu2204-base");
  CHECK(pool.max_vms == 2);
  CHECK(pool.idle_timeout_s == 30);
  CHECK(pool.labels.at("pool") == "v4");
  CHECK(pool.labels.at("accelerator") == "tpu");
  // The same command lines as deploy/tpu/lib.sh.
  CHECK(TpuCreateArgs(pool, "tae-v4-1", "us-east5-a") ==
        std::vector<std::string>{"compute", "tpus", "tpu-vm", "create", "tae-v4-1", "--zone",
                                 "us-east5-a", "--accelerator-type", "v4-8", "--version",
                                 "tpu-ubuntu2204-base", "--spot", "--labels", "tae=1,tae-pool=v4",
                                 "--project", "p"});
  CHECK(TpuDeleteArgs(pool, "tae-v4-1", "us-east5-a") ==
        std::vector<std::string>{"compute", "tpus", "tpu-vm", "delete", "tae-v4-1", "--zone",
                                 "us-east5-a", "--quiet", "--project", "p"});
  CHECK(TpuListArgs(pool, "z")[5] == "z");
}

TEST_CASE("a bad pool file names the line and the key", "[provider]") {
  const std::string head = "[[pool]]\nname = \"v4\"\naccelerator_type = \"v4-8\"\n";
  CHECK(ErrorOf(head + "zones = []\n") ==
        "pools.toml:4:9: zones: expected a non-empty array of zone names");
  CHECK(ErrorOf(head + "zones = [\"a\"]\nmax_vms = 0\n") ==
        "pools.toml:5:11: max_vms: expected an integer in 1..1000");
  CHECK(ErrorOf(head + "zones = [\"a\"]\nzone = \"b\"\n") ==
        "pools.toml:5:8: unknown key 'zone' in [[pool]]");
  CHECK(ErrorOf("[[pool]]\nname = \"V4!\"\n") ==
        "pools.toml:2:8: name: lowercase letters, digits and '-', starting with a letter, at "
        "most 40");
  CHECK(ErrorOf(head + "zones = [\"a\"]\nspot = true\npreemptible = true\n") ==
        "pools.toml:1:1: [[pool]]: spot and preemptible exclude each other");
  CHECK(ErrorOf("[[pool]]\nname = \"v4\"\n") ==
        "pools.toml:1:1: [[pool]]: name, accelerator_type and zones are required");
  CHECK(ErrorOf(head + "zones = [\"a\"]\n[[pool]]\nname = \"v4\"\naccelerator_type = \"x\"\n"
                       "zones = [\"b\"]\n") == "pools.toml:5:1: pool 'v4' is defined twice");
}

TEST_CASE("a pool's agents: one gcloud ssh session per worker, strict host keys, no token",
          "[provider]") {
  absl::StatusOr<std::vector<TpuPool>> pools = ParseTpuPools(
      "[[pool]]\nname = \"v4\"\naccelerator_type = \"v4-16\"\nzones = [\"z1\"]\n"
      "labels = { accelerator = \"tpu\" }\nslots = 2\ntunnel_port = 18000\n"
      "work_dir = \"/var/tmp/w\"\nssh_user = \"tae\"\ninternal_ip = true\n",
      "pools.toml", "/opt/tae/bin/tae-agent");
  REQUIRE(pools.ok());
  const TpuPool& pool = (*pools)[0];
  const TpuWorker worker{"tae-v4-1", "z1", 1, "10.0.0.3"};
  CHECK(TpuAgentId(worker) == "tae-v4-1-w1");
  CHECK(TpuSshArgs(pool, worker, "127.0.0.1:7000") ==
        std::vector<std::string>{
            "compute",
            "tpus",
            "tpu-vm",
            "ssh",
            "tae@tae-v4-1",
            "--zone",
            "z1",
            "--worker=1",
            "--internal-ip",
            "--strict-host-key-checking=yes",
            "--command",
            "exec /opt/tae/bin/tae-agent --stdin --taed 127.0.0.1:18000 --id tae-v4-1-w1 "
            "--slots 2 --labels "
            "accelerator=tpu,addr=10.0.0.3,pool=v4,provider=gcloud-tpu,slice=tae-v4-1,worker=1,"
            "zone=z1 --work-dir /var/tmp/w/tae-v4-1-w1",
            "--",
            "-R",
            "127.0.0.1:18000:127.0.0.1:7000",
            "-o",
            "ExitOnForwardFailure=yes",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=3"});
  // gcloud splits --command on single spaces and ssh joins it again: no runs of spaces.
  CHECK(TpuAgentCommand(pool, worker).find("  ") == std::string::npos);

  absl::StatusOr<std::vector<TpuPool>> boxed_pools = ParseTpuPools(
      "[[pool]]\nname = \"v4\"\naccelerator_type = \"v4-16\"\nzones = [\"z1\"]\n"
      "work_dir = \"/var/tmp/w\"\ntunnel_port = 18000\n"
      "image = \"us-docker.pkg.dev/p/tae/agent:1\"\n",
      "pools.toml", "/home/me/tae/build/bin/tae-agent");
  REQUIRE(boxed_pools.ok());
  const TpuPool& boxed = (*boxed_pools)[0];
  CHECK(boxed.agent == "/opt/tae/bin/tae-agent");  // the image's, not this machine's
  const std::string boxed_command = TpuAgentCommand(boxed, worker);
  INFO(boxed_command);
  CHECK(boxed_command.rfind("exec sudo docker run --rm -i --network host --privileged --user root "
                            "-v /var/tmp/w:/var/tmp/w --entrypoint /opt/tae/bin/tae-agent "
                            "us-docker.pkg.dev/p/tae/agent:1 --stdin --taed 127.0.0.1:18000 --id "
                            "tae-v4-1-w1 ",
                            0) == 0);

  // The alias gcloud's ssh looks up: tpu.<node id>-<worker>-<key's last 6>, lowercased.
  CHECK(TpuKnownHostsLine("1000000000000000001", 1, "ssh-ed25519",
                          "AAAAC3NzaC1lZDI1NTE5AAAAIKfX7z") ==
        "tpu.1000000000000000001-1-ikfx7z ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKfX7z");
  CHECK(TpuGuestAttributesArgs(pool, "tae-v4-1", "z1") ==
        std::vector<std::string>{"compute", "tpus", "tpu-vm", "get-guest-attributes", "tae-v4-1",
                                 "--zone", "z1", "--format=json"});
}

TEST_CASE("a queued pool asks through queued resources and deletes through them", "[provider]") {
  absl::StatusOr<std::vector<TpuPool>> pools = ParseTpuPools(
      "[[pool]]\nname = \"v5\"\naccelerator_type = \"v5litepod-8\"\nzones = [\"z1\"]\n"
      "queued = true\nspot = true\nvalid_until = \"6h\"\n",
      "pools.toml");
  REQUIRE(pools.ok());
  const TpuPool& pool = (*pools)[0];
  CHECK(TpuQueuedCreateArgs(pool, "tae-v5-1", "z1") ==
        std::vector<std::string>{"compute", "tpus", "queued-resources", "create", "tae-v5-1",
                                 "--node-id", "tae-v5-1", "--zone", "z1", "--accelerator-type",
                                 "v5litepod-8", "--runtime-version", "tpu-ubuntu2204-base",
                                 "--spot", "--valid-until-duration", "6h", "--labels",
                                 "tae=1,tae-pool=v5"});
  CHECK(TpuQueuedDeleteArgs(pool, "tae-v5-1", "z1") ==
        std::vector<std::string>{"compute", "tpus", "queued-resources", "delete", "tae-v5-1",
                                 "--zone", "z1", "--force", "--quiet"});
  CHECK(TpuQueuedListArgs(pool, "z1") == std::vector<std::string>{"compute", "tpus",
                                                                  "queued-resources", "list",
                                                                  "--zone", "z1", "--format=json"});
  const std::string head = "[[pool]]\nname = \"v5\"\naccelerator_type = \"x\"\nzones = [\"a\"]\n";
  CHECK(ErrorOf(head + "queued = true\npreemptible = true\n") ==
        "pools.toml:1:1: [[pool]]: queued resources take spot = true, not preemptible");
  CHECK(ErrorOf(head + "valid_until = \"6h\"\n") ==
        "pools.toml:1:1: [[pool]]: valid_until needs queued = true");
  CHECK(ErrorOf(head + "queued = true\nvalid_until = \"soon\"\n") ==
        "pools.toml:6:15: valid_until: expected a duration like \"30m\", \"6h\" or \"2d\"");
  CHECK(ErrorOf(head + "work_dir = \"tmp/x\"\n") ==
        "pools.toml:5:12: work_dir: expected an absolute path");
  CHECK(ErrorOf(head + "agent = \"tae-agent; rm -rf /\"\n") ==
        "pools.toml:5:9: agent: no spaces, quotes, '$', '`', ',', '=' or a leading '-'");
}

TEST_CASE("capacity errors are told from other gcloud errors", "[provider]") {
  CHECK(
      IsCapacityError("ERROR: (gcloud.compute.tpus.tpu-vm.create) {\"code\": 8, \"message\": "
                      "\"There is no more capacity in the zone \\\"us-east5-a\\\"\"}"));
  CHECK(IsCapacityError("RESOURCE_EXHAUSTED: stockout"));
  CHECK_FALSE(IsCapacityError("ERROR: (gcloud.compute.tpus.tpu-vm.create) PERMISSION_DENIED"));
}

TEST_CASE("an ssh hosts file parses, and its ssh command line keeps the token off it",
          "[provider]") {
  absl::StatusOr<std::vector<SshHost>> hosts = ParseSshHosts(
      "[[host]]\ndestination = \"alice@box\"\nslots = 2\nlabels = { gpu = \"a100\" }\n",
      "hosts.toml", "/opt/tae/bin/tae-agent");
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 1);
  const SshHost& host = (*hosts)[0];
  CHECK(host.id == "box");
  CHECK(host.labels.at("provider") == "ssh");
  const std::vector<std::string> argv = SshArgv(host, "127.0.0.1:4000");
  CHECK(argv[0] == "/usr/bin/ssh");
  CHECK(argv.back() ==
        "exec /opt/tae/bin/tae-agent --stdin --taed 127.0.0.1:17733 --id box --slots 2 --labels "
        "gpu=a100,provider=ssh --work-dir .tae-agent");
  CHECK(std::find(argv.begin(), argv.end(), "127.0.0.1:17733:127.0.0.1:4000") != argv.end());
  CHECK(std::find(argv.begin(), argv.end(), "StrictHostKeyChecking=yes") != argv.end());
  absl::StatusOr<std::vector<SshHost>> bad =
      ParseSshHosts("[[host]]\ndestination = \"-oProxyCommand=x\"\n", "hosts.toml", "a");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "hosts.toml:2:15: destination: must not start with '-'");
}

}  // namespace tae::provider
