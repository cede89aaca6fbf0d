// Agent identity (docs/security.md): credentials as the agent link checks them, enrolment and
// revocation through the controller, and which checkpoint uploads an agent may make.

#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <string>

#include "boost/asio/io_context.hpp"
#include "common/auth/credential.h"
#include "common/snapshot/snapshot.h"
#include "server/controller/controller.h"
#include "server/registry/credentials.h"
#include "server/rpc/agent_link_service.h"
#include "server/rpc/convert.h"
#include "server/store/store.h"

namespace tae {
namespace {

TEST_CASE(
    "a credential is ID.SECRET with a 64-hex secret, and the table authenticates only live ones") {
  const std::string secret(64, 'a');
  auto parsed = auth::ParseCredential("tpu-w0.vm-1." + secret);
  REQUIRE(parsed.has_value());
  CHECK(parsed->agent_id == "tpu-w0.vm-1");  // ids may hold dots
  CHECK(parsed->secret == secret);
  CHECK_FALSE(auth::ParseCredential(secret).has_value());               // the shared token
  CHECK_FALSE(auth::ParseCredential("." + secret).has_value());         // no id
  CHECK_FALSE(auth::ParseCredential("a." + secret + "0").has_value());  // 65 digits
  CHECK_FALSE(auth::ParseCredential("a." + std::string(64, 'G')).has_value());

  registry::CredentialTable table;
  table.Put("a", registry::SecretHash(secret));
  CHECK(table.Authenticate("a." + secret) == std::optional<std::string>("a"));
  CHECK_FALSE(table.Authenticate("b." + secret).has_value());  // someone else's id
  CHECK_FALSE(table.Authenticate("a." + std::string(64, 'b')).has_value());
  table.Revoke("a");
  CHECK_FALSE(table.Authenticate("a." + secret).has_value());
}

TEST_CASE("enrolment gives each id one credential, providers re-key, revoked ids stay out") {
  boost::asio::io_context io;
  auto store = store::Store::Open(":memory:");
  REQUIRE(store.ok());
  registry::CredentialTable table;
  controller::Options options;
  options.credentials = &table;
  controller::Controller controller(&io, store->get(), options);

  auto first = controller.Enrol("w1");
  REQUIRE(first.ok());
  CHECK(table.Authenticate(*first) == std::optional<std::string>("w1"));
  CHECK(controller.Enrol("w1").status().code() == absl::StatusCode::kAlreadyExists);
  CHECK(controller.Enrol("bad id").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(controller.Enrol(std::string(129, 'x')).status().code() ==
        absl::StatusCode::kInvalidArgument);

  // A provider starting w2 twice: the second key replaces the first.
  auto key1 = controller.MintCredential("w2");
  auto key2 = controller.MintCredential("w2");
  REQUIRE(key1.ok());
  REQUIRE(key2.ok());
  CHECK_FALSE(table.Authenticate(*key1).has_value());
  CHECK(table.Authenticate(*key2) == std::optional<std::string>("w2"));

  REQUIRE(controller.Revoke("w1", "compromised").ok());
  CHECK_FALSE(table.Authenticate(*first).has_value());
  CHECK(table.Authenticate(*key2).has_value());  // nobody else
  CHECK(controller.Enrol("w1").status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(controller.MintCredential("w1").status().code() == absl::StatusCode::kPermissionDenied);

  // What the store keeps survives a restart of taed: reloaded, the table agrees.
  auto stored = (*store)->ListCredentials();
  REQUIRE(stored.ok());
  registry::CredentialTable reloaded;
  reloaded.Load(*stored);
  CHECK(reloaded.Authenticate(*key2) == std::optional<std::string>("w2"));
  CHECK_FALSE(reloaded.Authenticate(*first).has_value());
  for (const model::CredentialRecord& c : *stored) {
    CHECK(c.secret_sha256.find(key2->substr(3)) == std::string::npos);  // no secret stored
  }
}

TEST_CASE("credentials die with what they were minted for, and may be minted again after") {
  boost::asio::io_context io;
  auto store = store::Store::Open(":memory:");
  REQUIRE(store.ok());
  registry::CredentialTable table;
  controller::Options options;
  options.credentials = &table;
  controller::Controller controller(&io, store->get(), options);

  auto enrolled = controller.Enrol("hand-1");
  auto local = controller.MintCredential("local-0");
  auto pod0 = controller.MintCredential("tae-v5e-1-w0", "gke");
  auto pod1 = controller.MintCredential("tae-v5e-1-w1", "gke");
  auto other = controller.MintCredential("tae-v5e-2-w0", "gke");
  for (const auto* key : {&enrolled, &local, &pod0, &pod1, &other}) {
    REQUIRE(key->ok());
  }
  // A deleted slice: exactly its pods' credentials stop working, another slice's do not.
  CHECK(controller.RetireCredentials("gke", {"tae-v5e-1-w0", "tae-v5e-1-w1", "local-0"},
                                     "its gke slice was deleted") == 2);
  CHECK_FALSE(table.Authenticate(*pod0).has_value());
  CHECK_FALSE(table.Authenticate(*pod1).has_value());
  CHECK(table.Authenticate(*other) == std::optional<std::string>("tae-v5e-2-w0"));
  CHECK(table.Authenticate(*local) == std::optional<std::string>("local-0"));
  // Again: nothing left to retire.
  CHECK(controller.RetireCredentials("gke", {"tae-v5e-1-w0"}, "again") == 0);
  // taed stops (or starts again): every credential minted for an agent it starts dies; the
  // enrolled agent's and the other slice's live on.
  CHECK(controller.RetireCredentials("provider", {}, "taed stopped its agents") == 1);
  CHECK_FALSE(table.Authenticate(*local).has_value());
  CHECK(table.Authenticate(*enrolled) == std::optional<std::string>("hand-1"));
  CHECK(table.Authenticate(*other).has_value());
  // The store agrees after a restart, and no secret is left in it for a retired id.
  auto stored = (*store)->ListCredentials();
  REQUIRE(stored.ok());
  registry::CredentialTable reloaded;
  reloaded.Load(*stored);
  for (const auto* key : {&local, &pod0, &pod1}) {
    CHECK_FALSE(reloaded.Authenticate(**key).has_value());
  }
  CHECK(reloaded.Authenticate(*other).has_value());
  CHECK(reloaded.Authenticate(*enrolled).has_value());
  // Retired is not revoked: a slice of the same name later gets its pods fresh credentials,
  // while the enrolment token still cannot take the id.
  auto again = controller.MintCredential("tae-v5e-1-w0", "gke");
  REQUIRE(again.ok());
  CHECK(table.Authenticate(*again) == std::optional<std::string>("tae-v5e-1-w0"));
  CHECK(controller.Enrol("tae-v5e-1-w1").status().code() == absl::StatusCode::kAlreadyExists);
}

class CountingChannel final : public registry::AgentChannel {
 public:
  void Send(const tae::v1::TaedMessage&) override {}
  void Close() override { ++closed; }
  int closed = 0;
};

TEST_CASE(
    "a revocation closes every open stream of the id, registered or idle, and a revoked id never "
    "registers again") {
  boost::asio::io_context io;
  auto store = store::Store::Open(":memory:");
  REQUIRE(store.ok());
  registry::CredentialTable table;
  controller::Options options;
  options.credentials = &table;
  controller::Controller controller(&io, store->get(), options);
  REQUIRE(controller.Enrol("w1").ok());
  REQUIRE(controller.Enrol("w2").ok());
  auto registered = std::make_shared<CountingChannel>();
  auto idle = std::make_shared<CountingChannel>();
  auto other = std::make_shared<CountingChannel>();
  table.AddStream("w1", registered);
  table.AddStream("w1", idle);
  table.AddStream("w2", other);
  controller::AgentHello hello;
  hello.agent.id = "w1";
  hello.agent.slots = 1;
  controller.OnRegister(registered, hello);
  REQUIRE(controller.registry().agents().at("w1").connected);

  REQUIRE(controller.Revoke("w1", "compromised").ok());
  CHECK(registered->closed >= 1);
  CHECK(idle->closed == 1);
  CHECK(other->closed == 0);
  CHECK(controller.registry().agents().at("w1").state() == registry::AgentState::kRevoked);
  CHECK(controller.registry().agents().at("w1").revoked == "compromised");
  // A Register that was on its way when the revocation came: refused, its stream closed.
  controller.OnRegister(idle, hello);
  CHECK(idle->closed == 2);
  CHECK(controller.registry().agents().at("w1").state() == registry::AgentState::kRevoked);
}

TEST_CASE("ids are enrolled once whatever their case, and a retried enrolment is answered again") {
  boost::asio::io_context io;
  auto store = store::Store::Open(":memory:");
  REQUIRE(store.ok());
  registry::CredentialTable table;
  controller::Options options;
  options.credentials = &table;
  controller::Controller controller(&io, store->get(), options);
  auto first = controller.Enrol("local-0", "request-1");
  REQUIRE(first.ok());
  CHECK(controller.Enrol("LOCAL-0").status().code() == absl::StatusCode::kAlreadyExists);
  CHECK(controller.Enrol("Local-0", "request-1").status().code() ==
        absl::StatusCode::kAlreadyExists);
  // The answer to request-1 was lost: its retry gets a credential, the lost one stops working.
  auto retried = controller.Enrol("local-0", "request-1");
  REQUIRE(retried.ok());
  CHECK(table.Authenticate(*retried) == std::optional<std::string>("local-0"));
  CHECK_FALSE(table.Authenticate(*first).has_value());
  // Another enrolment of the id (another request) is still refused.
  CHECK(controller.Enrol("local-0", "request-2").status().code() ==
        absl::StatusCode::kAlreadyExists);
  CHECK(controller.Enrol("local-0").status().code() == absl::StatusCode::kAlreadyExists);
}

TEST_CASE("an agent may upload only the blobs its own offers named, at their size, in time") {
  rpc::UploadGrants grants;
  const std::string hash(64, 'c');
  google::protobuf::RepeatedPtrField<tae::v1::BlobChunk> chunks;
  tae::v1::BlobChunk* chunk = chunks.Add();
  chunk->set_hash(hash);
  chunk->set_total_size(10);
  CHECK(grants.Accept("a", chunks, 0).code() == absl::StatusCode::kPermissionDenied);
  REQUIRE(grants.Grant("a", {{hash, 10}}, 0).ok());
  CHECK(grants.Accept("a", chunks, 1).ok());
  CHECK(grants.Accept("b", chunks, 1).code() == absl::StatusCode::kPermissionDenied);
  chunk->set_total_size(11);
  CHECK(grants.Accept("a", chunks, 1).code() == absl::StatusCode::kInvalidArgument);
  chunk->set_total_size(10);
  // Expired: refused, and named for its partial upload to be dropped.
  const double later = rpc::UploadGrants::kGrantSeconds + 1;
  {
    const rpc::UploadGrants::Expired expired = grants.Expire(later);
    CHECK(expired.partials == std::vector<std::pair<std::string, std::string>>{{"a", hash}});
    CHECK(expired.unnamed == std::vector<std::string>{hash});
  }
  CHECK(grants.Accept("a", chunks, later).code() == absl::StatusCode::kPermissionDenied);
  // Done: no longer granted.
  REQUIRE(grants.Grant("a", {{hash, 10}}, 0).ok());
  grants.Done("a", {hash});
  CHECK(grants.Accept("a", chunks, 1).code() == absl::StatusCode::kPermissionDenied);
  // A running quota per agent.
  CHECK(grants.Grant("a", {{hash, rpc::UploadGrants::kMaxGrantedBytes + 1}}, 0).code() ==
        absl::StatusCode::kResourceExhausted);
  // Sizes that would wrap a 64-bit sum to a small one: refused, not granted as small.
  const std::string second(64, 'd');
  CHECK(grants.Grant("b", {{hash, ~uint64_t{0} - 10}, {second, 20}}, 0).code() ==
        absl::StatusCode::kResourceExhausted);
  CHECK(grants.Grant("b", {{second, 20}}, 0).ok());  // nothing of the refused grant was kept
  CHECK(grants.Grant("b", {{hash, ~uint64_t{0} - 10}}, 0).code() ==
        absl::StatusCode::kResourceExhausted);
}

TEST_CASE("an expired grant names its blob for removal only when no other agent's grant does",
          "[rpc][checkpoints]") {
  rpc::UploadGrants grants(100);
  const std::string shared(64, 'e');
  const std::string own(64, 'f');
  REQUIRE(grants.Grant("a", {{shared, 10}, {own, 10}}, 0).ok());
  REQUIRE(grants.Grant("b", {{shared, 10}}, 50).ok());
  CHECK(grants.Named(shared, 60));
  const rpc::UploadGrants::Expired first = grants.Expire(120);  // a's are over, b's open to 150
  CHECK(first.partials.size() == 2);
  CHECK(first.unnamed == std::vector<std::string>{own});
  CHECK(grants.Named(shared, 120));
  CHECK_FALSE(grants.Named(own, 120));
  const rpc::UploadGrants::Expired second = grants.Expire(151);
  CHECK(second.partials == std::vector<std::pair<std::string, std::string>>{{"b", shared}});
  CHECK(second.unnamed == std::vector<std::string>{shared});
  CHECK(grants.Expire(152).empty());
}

TEST_CASE("a manifest whose sizes would wrap, or name one content with two sizes, is refused",
          "[rpc][checkpoints]") {
  const std::string a(64, 'a');
  const std::string b(64, 'b');
  auto line = [](const std::string& path, uint64_t size, const std::string& hash) {
    return snapshot::ManifestText({{path, 0644, size, hash}});
  };
  // One entry of 2^64 - 8 bytes beside one of 16: the sum wraps to 8 in uint64.
  const std::string wrapped =
      snapshot::ManifestText({{"big.pt", 0644, ~uint64_t{0} - 7, a}, {"small.pt", 0644, 16, b}});
  absl::StatusOr<controller::CheckpointOffer> offer =
      rpc::ParseCheckpointOffer(1, 1, 10, wrapped, "");
  REQUIRE_FALSE(offer.ok());
  CHECK(offer.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(offer.status().message()).find("larger than 2^63 bytes") != std::string::npos);
  const std::string twice = snapshot::ManifestText({{"x.pt", 0644, 16, a}, {"y.pt", 0644, 17, a}});
  CHECK(rpc::ParseCheckpointOffer(1, 1, 10, twice, "").status().code() ==
        absl::StatusCode::kInvalidArgument);
  absl::StatusOr<controller::CheckpointOffer> fine =
      rpc::ParseCheckpointOffer(1, 1, 10, line("m.pt", 1 << 20, a), "");
  REQUIRE(fine.ok());
  CHECK(fine->bytes == 1 << 20);
}

TEST_CASE("an agent holds a blob only once its own chunks of it, in order, hash to its name") {
  rpc::UploadGrants grants;
  const std::string content = "0123456789abcdefghij";
  const std::string hash = snapshot::Sha256Hex(content);
  const std::string other = snapshot::Sha256Hex("another file");
  REQUIRE(grants.Grant("a", {{hash, 20}, {other, 12}}, 0).ok());
  REQUIRE(grants.Grant("b", {{hash, 20}}, 0).ok());
  auto put = [&](const std::string& agent, uint64_t offset, const std::string& data,
                 const std::string& name) {
    google::protobuf::RepeatedPtrField<tae::v1::BlobChunk> chunks;
    tae::v1::BlobChunk* chunk = chunks.Add();
    chunk->set_hash(name);
    chunk->set_offset(offset);
    chunk->set_total_size(name == hash ? 20 : 12);
    chunk->set_data(data);
    return grants.Accept(agent, chunks, 1);
  };
  const std::vector<std::string> both = {hash, other};
  CHECK(grants.Held("a", both, 1).empty());
  // Knowing the hash is not enough: wrong bytes of the right size hold nothing.
  REQUIRE(put("a", 0, std::string(20, 'x'), hash).ok());
  CHECK(grants.Held("a", both, 1).empty());
  // Out of order: the second half first, then the first, holds nothing either.
  REQUIRE(put("a", 10, content.substr(10), hash).ok());
  REQUIRE(put("a", 0, content.substr(0, 10), hash).ok());
  CHECK(grants.Held("a", both, 1).empty());
  // Another agent's upload of the bytes does not count for this one.
  REQUIRE(put("b", 0, content, hash).ok());
  CHECK(grants.Held("b", both, 1) == std::set<std::string>{hash});
  CHECK(grants.Held("a", both, 1).empty());
  // Started over at 0 and continued in order: held, and stays held when sent again wrongly.
  REQUIRE(put("a", 0, content.substr(0, 7), hash).ok());
  REQUIRE(put("a", 7, content.substr(7), hash).ok());
  CHECK(grants.Held("a", both, 1) == std::set<std::string>{hash});
  REQUIRE(put("a", 0, std::string(20, 'x'), hash).ok());
  CHECK(grants.Held("a", both, 1) == std::set<std::string>{hash});
  // A new offer of the blob at the same size keeps it held; the grant's end, or Done, drops it.
  REQUIRE(grants.Grant("a", {{hash, 20}}, 100).ok());
  CHECK(grants.Held("a", both, 101) == std::set<std::string>{hash});
  CHECK(grants.Held("a", both, 101 + rpc::UploadGrants::kGrantSeconds).empty());
  grants.Done("a", {hash});
  CHECK(grants.Held("a", both, 101).empty());
}

}  // namespace
}  // namespace tae
