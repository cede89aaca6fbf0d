// The agent link from the other side, round two (docs/security.md, docs/reliability.md), through
// the real binaries: an agent of our own making holds a run by the ordinary protocol, and a rogue
// with its own valid credential tries what it does not hold. A revoked agent's idle second stream
// cannot register it again; a checkpoint of its own cannot claim a blob another run stored by
// naming its hash; another run's manifest, snapshot blob and checkpoint blob read as
// missing, with the very answer a missing one gets, and an offer for another run is answered as
// one for a run that does not exist; a forged ProfileFailed is ignored; a batch
// with NaN in it is acked and its other events stored; a job's output that is not UTF-8 reaches
// `taectl logs` with U+FFFD.

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "common/snapshot/snapshot.h"
#include "grpcpp/create_channel.h"
#include "tae/v1/agent_link.grpc.pb.h"
#include "tests/integration/fake_tpu_api.h"  // ReadFile
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

std::shared_ptr<grpc::Channel> Dial(const Cluster& cluster) {
  return grpc::CreateChannel(FirstLine(cluster.home() + "/agent.addr"),
                             grpc::InsecureChannelCredentials());
}

void Prepare(grpc::ClientContext* ctx, const std::string& key) {
  ctx->AddMetadata("authorization", "Bearer " + key);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(150));
}

// One Connect stream, driven by hand.
class Stream {
 public:
  Stream(const Cluster& cluster, const std::string& key)
      : stub_(tae::v1::AgentLink::NewStub(Dial(cluster))) {
    Prepare(&ctx_, key);
    stream_ = stub_->Connect(&ctx_);
  }
  ~Stream() {
    ctx_.TryCancel();
    stream_->Finish().ok();  // cancelled by us, or ended by taed
  }

  bool Register(const std::string& id, int64_t held_run = 0,
                const std::map<std::string, std::string>& labels = {}, int slots = 1) {
    tae::v1::AgentMessage hello;
    hello.mutable_register_()->set_agent_id(id);
    hello.mutable_register_()->set_slots(slots);
    for (const auto& [key, value] : labels) {
      (*hello.mutable_register_()->mutable_labels())[key] = value;
    }
    hello.mutable_register_()->set_host("rogue");
    if (held_run > 0) {
      tae::v1::HeldRun* held = hello.mutable_register_()->add_held_runs();
      held->set_run_id(held_run);
      held->set_attempt(1);
    }
    return stream_->Write(hello);
  }
  bool Send(const tae::v1::AgentMessage& message) { return stream_->Write(message); }
  bool SendEvents(const tae::v1::EventBatch& batch) {
    tae::v1::AgentMessage message;
    *message.mutable_events() = batch;
    return stream_->Write(message);
  }
  // Reads until `pred` holds for a message (true) or the stream ends (false).
  bool ReadUntil(const std::function<bool(const tae::v1::TaedMessage&)>& pred) {
    tae::v1::TaedMessage in;
    while (stream_->Read(&in)) {
      if (pred(in)) {
        last_ = in;
        return true;
      }
    }
    return false;
  }
  bool AckedUpTo(uint64_t seq) {
    return ReadUntil(
        [&](const tae::v1::TaedMessage& m) { return m.has_ack() && m.ack().seq() >= seq; });
  }
  const tae::v1::TaedMessage& last() const { return last_; }

 private:
  std::unique_ptr<tae::v1::AgentLink::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<tae::v1::AgentMessage, tae::v1::TaedMessage>> stream_;
  tae::v1::TaedMessage last_;
};

// Unary calls and blob fetches with one credential.
class Calls {
 public:
  Calls(const Cluster& cluster, std::string key)
      : stub_(tae::v1::AgentLink::NewStub(Dial(cluster))), key_(std::move(key)) {}

  grpc::Status Enrol(const std::string& id, std::string* credential) {
    grpc::ClientContext ctx;
    Prepare(&ctx, key_);
    tae::v1::EnrolRequest request;
    request.set_agent_id(id);
    tae::v1::EnrolResponse response;
    grpc::Status status = stub_->Enrol(&ctx, request, &response);
    *credential = response.credential();
    return status;
  }
  grpc::Status Manifest(const std::string& snapshot_id) {
    grpc::ClientContext ctx;
    Prepare(&ctx, key_);
    tae::v1::GetManifestRequest request;
    request.set_snapshot_id(snapshot_id);
    tae::v1::GetManifestResponse response;
    return stub_->GetManifest(&ctx, request, &response);
  }
  // Fetches one blob whole; `data` gets its bytes.
  grpc::Status Fetch(const std::string& hash, bool checkpoints, std::string* data = nullptr) {
    grpc::ClientContext ctx;
    Prepare(&ctx, key_);
    tae::v1::FetchBlobsRequest request;
    request.add_hashes(hash);
    request.set_checkpoints(checkpoints);
    auto reader = stub_->FetchBlobs(&ctx, request);
    tae::v1::FetchBlobsChunk chunk;
    std::string got;
    while (reader->Read(&chunk)) {
      got += chunk.data();
    }
    if (data != nullptr) {
      *data = got;
    }
    return reader->Finish();
  }
  // A one-file checkpoint manifest of `data`, named `hash` (its own unless given).
  static std::string OneFile(const std::string& data, std::string hash = "") {
    return snapshot::ManifestText(
        {{"model.pt", 0644, data.size(), hash.empty() ? snapshot::Sha256Hex(data) : hash}});
  }
  // Offers a checkpoint of `run` at step 5; `missing` gets the blobs taed asks for.
  grpc::Status Offer(int64_t run, const std::string& manifest,
                     std::vector<std::string>* missing = nullptr) {
    grpc::ClientContext ctx;
    Prepare(&ctx, key_);
    tae::v1::OfferCheckpointRequest request;
    request.set_run_id(run);
    request.set_attempt(1);
    request.set_step(5);
    request.set_manifest(manifest);
    tae::v1::OfferCheckpointResponse response;
    grpc::Status status = stub_->OfferCheckpoint(&ctx, request, &response);
    if (missing != nullptr) {
      missing->assign(response.missing().begin(), response.missing().end());
    }
    return status;
  }
  // Uploads `data` as one chunk of the blob `hash` (its own unless given).
  grpc::Status Put(const std::string& data, std::string hash = "") {
    grpc::ClientContext ctx;
    Prepare(&ctx, key_);
    tae::v1::PutCheckpointBlobsRequest request;
    tae::v1::BlobChunk* chunk = request.add_chunks();
    chunk->set_hash(hash.empty() ? snapshot::Sha256Hex(data) : hash);
    chunk->set_offset(0);
    chunk->set_total_size(data.size());
    chunk->set_data(data);
    tae::v1::PutCheckpointBlobsResponse response;
    return stub_->PutCheckpointBlobs(&ctx, request, &response);
  }
  grpc::Status Commit(int64_t run, const std::string& manifest) {
    grpc::ClientContext ctx;
    Prepare(&ctx, key_);
    tae::v1::CommitCheckpointRequest request;
    request.set_run_id(run);
    request.set_attempt(1);
    request.set_step(5);
    request.set_manifest(manifest);
    tae::v1::CommitCheckpointResponse response;
    return stub_->CommitCheckpoint(&ctx, request, &response);
  }
  // Offers, uploads and commits a one-file checkpoint of `run` at step 5.
  grpc::Status Checkpoint(int64_t run, const std::string& data) {
    grpc::Status status = Offer(run, OneFile(data));
    status = status.ok() ? Put(data) : status;
    return status.ok() ? Commit(run, OneFile(data)) : status;
  }

 private:
  std::unique_ptr<tae::v1::AgentLink::Stub> stub_;
  std::string key_;
};

tae::v1::Event* AddEvent(tae::v1::EventBatch* batch, uint64_t seq, int64_t run) {
  tae::v1::Event* event = batch->add_events();
  event->set_seq(seq);
  event->set_run_id(run);
  event->set_attempt(1);
  event->set_wall_time(1.7e9);
  return event;
}

void AddMetric(tae::v1::Event* event, int64_t step, const std::string& key, double value) {
  event->mutable_metrics()->set_step(step);
  tae::v1::Scalar* scalar = event->mutable_metrics()->add_values();
  scalar->set_key(key);
  scalar->set_value(value);
}

std::string StateOf(Cluster& cluster, const std::string& id) {
  for (const auto& agent : cluster.TaectlJson({"agents"})) {
    if (agent.at("id") == id) {
      return agent.at("state");
    }
  }
  return "";
}

TEST_CASE(
    "a rogue agent reads nothing it does not hold, claims no stored blob by its hash and forges no "
    "profile failure: its revocation ends every stream it has open and a NaN batch is acked with "
    "its other events stored",
    "[security]") {
  Cluster cluster(0, 1);
  REQUIRE(cluster.started());
  constexpr char kScript[] = "echo never run here\n";
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  cluster.dir().Write("job/run.sh", kScript);
  const std::string spec = cluster.dir().Write(
      "victim.toml",
      "name = \"victim\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\ncommand = \"sh run.sh\"\n");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());

  Calls enrolment(cluster, FirstLine(cluster.home() + "/agent.token"));
  std::string holder_key;
  std::string rogue_key;
  REQUIRE(enrolment.Enrol("holder", &holder_key).ok());
  REQUIRE(enrolment.Enrol("rogue-1", &rogue_key).ok());

  // The holder takes the run by the ordinary protocol and starts it.
  Stream holder(cluster, holder_key);
  REQUIRE(holder.Register("holder"));
  REQUIRE(holder.ReadUntil([](const tae::v1::TaedMessage& m) { return m.has_start_run(); }));
  const tae::v1::StartRun start = holder.last().start_run();
  const int64_t run = start.run_id();
  const std::string r = "r" + std::to_string(run);
  REQUIRE(!start.snapshot_id().empty());
  {
    tae::v1::EventBatch started;
    AddEvent(&started, 1, run)->mutable_started()->set_pid(1);
    REQUIRE(holder.SendEvents(started));
    REQUIRE(holder.AckedUpTo(1));
  }

  // A batch with NaN and infinity in it: acked, the bad time dropped, everything else stored (the
  // NaN loss as the run's divergence).
  {
    tae::v1::EventBatch batch;
    tae::v1::Event* first = AddEvent(&batch, 2, run);
    AddMetric(first, 1, "train/loss", std::numeric_limits<double>::quiet_NaN());
    AddMetric(first, 1, "train/acc", 0.5);
    AddEvent(&batch, 3, run)->mutable_log()->set_stream("stdout");
    batch.mutable_events(1)->mutable_log()->set_text("the line after the nan");
    tae::v1::Event* third = AddEvent(&batch, 4, run);
    third->set_wall_time(std::numeric_limits<double>::infinity());
    AddMetric(third, 2, "train/acc", 0.75);
    REQUIRE(holder.SendEvents(batch));
    CHECK(holder.AckedUpTo(4));
  }
  CommandResult logs = cluster.Taectl({"logs", r});
  CHECK(logs.out.find("the line after the nan") != std::string::npos);
  CommandResult exported = cluster.Taectl({"export", exp, "--format", "csv"});
  INFO(exported.out);
  CHECK(exported.out.find("train/acc") != std::string::npos);
  CHECK(exported.out.find("0.75") != std::string::npos);

  // Reads: the holder reads its run's snapshot; the rogue gets for it exactly what it gets for
  // one that does not exist.
  Calls owner(cluster, holder_key);
  Calls rogue(cluster, rogue_key);
  CHECK(owner.Manifest(start.snapshot_id()).ok());
  const grpc::Status theirs = rogue.Manifest(start.snapshot_id());
  const grpc::Status missing = rogue.Manifest(std::string(64, 'a'));
  CHECK(theirs.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(missing.error_code() == theirs.error_code());
  CHECK(missing.error_message() == theirs.error_message());

  const std::string script_hash = snapshot::Sha256Hex(kScript);
  std::string got;
  CHECK(owner.Fetch(script_hash, false, &got).ok());
  CHECK(got == kScript);
  const grpc::Status their_blob = rogue.Fetch(script_hash, false, &got);
  const grpc::Status no_blob = rogue.Fetch(std::string(64, 'b'), false);
  CHECK(their_blob.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(got.empty());
  CHECK(no_blob.error_code() == their_blob.error_code());
  CHECK(no_blob.error_message() == their_blob.error_message());

  const std::string weights = "the victim's weights";
  {
    grpc::Status committed = owner.Checkpoint(run, weights);
    INFO(committed.error_message());
    REQUIRE(committed.ok());
  }
  CHECK(owner.Fetch(snapshot::Sha256Hex(weights), true, &got).ok());
  CHECK(got == weights);
  const grpc::Status their_checkpoint = rogue.Fetch(snapshot::Sha256Hex(weights), true, &got);
  const grpc::Status no_checkpoint = rogue.Fetch(std::string(64, 'c'), true);
  CHECK(their_checkpoint.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(got.empty());
  CHECK(no_checkpoint.error_code() == their_checkpoint.error_code());
  CHECK(no_checkpoint.error_message() == their_checkpoint.error_message());
  // An offer for the victim's run (live, at attempt 1) is answered as one for a run that does not
  // exist: nothing of its existence, attempt or state.
  {
    const grpc::Status theirs_offer = rogue.Offer(run, Calls::OneFile("x"));
    const grpc::Status none_offer = rogue.Offer(987654, Calls::OneFile("x"));
    CHECK(theirs_offer.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(none_offer.error_code() == theirs_offer.error_code());
    std::string theirs_text = theirs_offer.error_message();
    const std::string id = "r" + std::to_string(run);
    REQUIRE(theirs_text.find(id) != std::string::npos);
    theirs_text.replace(theirs_text.find(id), id.size(), "r987654");
    CHECK(none_offer.error_message() == theirs_text);
  }

  // The rogue registers on one stream and keeps a second one idle.
  Stream registered(cluster, rogue_key);
  Stream idle(cluster, rogue_key);
  REQUIRE(registered.Register("rogue-1"));
  REQUIRE(registered.ReadUntil([](const tae::v1::TaedMessage& m) { return m.has_registered(); }));

  // A run of its own: its checkpoint may not claim the victim's stored weights by their hash.
  // The offer asks for the blob like one never stored, a commit without the bytes (or with other
  // bytes under that name) is refused like one naming a blob never stored, and the weights stay
  // unreadable. Its own bytes commit as usual.
  cluster.dir().Write("own.toml",
                      "name = \"own\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\n"
                      "command = \"sh run.sh\"\n");
  REQUIRE(cluster.Taectl({"submit", cluster.dir().path() + "/own.toml"}).exit_code == 0);
  REQUIRE(registered.ReadUntil([](const tae::v1::TaedMessage& m) { return m.has_start_run(); }));
  const int64_t own_run = registered.last().start_run().run_id();
  {
    const std::string stolen = Calls::OneFile(weights);
    const std::string never = Calls::OneFile(weights, std::string(64, 'd'));
    std::vector<std::string> asked;
    REQUIRE(rogue.Offer(own_run, stolen, &asked).ok());
    CHECK(asked == std::vector<std::string>{snapshot::Sha256Hex(weights)});
    REQUIRE(rogue.Offer(own_run, never, &asked).ok());
    CHECK(asked == std::vector<std::string>{std::string(64, 'd')});
    const grpc::Status claimed = rogue.Commit(own_run, stolen);
    const grpc::Status unstored = rogue.Commit(own_run, never);
    CHECK(claimed.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(claimed.error_code() == unstored.error_code());
    CHECK(claimed.error_message() == unstored.error_message());
    // Other bytes of the same size under the name: refused as they would be for a blob the store
    // lacks (the answer does not tell that it has it), and they do not make the rogue hold it.
    CHECK(rogue.Put(std::string(weights.size(), 'x'), snapshot::Sha256Hex(weights)).error_code() ==
          grpc::StatusCode::DATA_LOSS);
    CHECK(rogue.Commit(own_run, stolen).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(rogue.Fetch(snapshot::Sha256Hex(weights), true, &got).error_code() ==
          grpc::StatusCode::NOT_FOUND);
    CHECK(got.empty());
    const grpc::Status own = rogue.Checkpoint(own_run, "the rogue's own weights");
    INFO(own.error_message());
    CHECK(own.ok());
  }

  // A profile of the run: the rogue's forged failure comes first and is ignored; the holder's
  // own answer is the one taectl reports.
  CommandResult profiled;
  std::thread profile([&] { profiled = cluster.Taectl({"profile", r, "--seconds", "1"}, 120); });
  REQUIRE(holder.ReadUntil([](const tae::v1::TaedMessage& m) { return m.has_profile_run(); }));
  const tae::v1::ProfileRun asked = holder.last().profile_run();
  {
    tae::v1::AgentMessage forged;
    forged.mutable_profile_failed()->set_run_id(run);
    forged.mutable_profile_failed()->set_attempt(1);
    forged.mutable_profile_failed()->set_id(asked.id());
    forged.mutable_profile_failed()->set_error("forged by the rogue");
    REQUIRE(registered.Send(forged));
    // Messages of one stream are taken in order: once this batch is acked, the forgery was seen.
    tae::v1::EventBatch empty;
    AddEvent(&empty, 1, run)->mutable_log()->set_stream("stdout");
    empty.mutable_events(0)->mutable_log()->set_text("a rogue line");
    REQUIRE(registered.SendEvents(empty));
    REQUIRE(registered.AckedUpTo(1));
  }
  {
    tae::v1::AgentMessage failed;
    failed.mutable_profile_failed()->set_run_id(run);
    failed.mutable_profile_failed()->set_attempt(1);
    failed.mutable_profile_failed()->set_id(asked.id());
    failed.mutable_profile_failed()->set_error("the holder's own answer");
    REQUIRE(holder.Send(failed));
  }
  profile.join();
  INFO(profiled.out << profiled.err);
  CHECK(profiled.exit_code != 0);
  CHECK((profiled.out + profiled.err).find("the holder's own answer") != std::string::npos);
  CHECK((profiled.out + profiled.err).find("forged") == std::string::npos);
  CHECK(cluster.Taectl({"logs", r}).out.find("a rogue line") == std::string::npos);

  // Revoked: both of its streams end, the idle one included, and nothing registers it again.
  CHECK(StateOf(cluster, "rogue-1") == "busy");  // registered, holding its own run
  CommandResult revoked = cluster.Taectl({"agents", "revoke", "rogue-1", "caught reading"});
  INFO(revoked.out << revoked.err);
  REQUIRE(revoked.exit_code == 0);
  CHECK_FALSE(registered.ReadUntil([](const tae::v1::TaedMessage&) { return false; }));
  CHECK_FALSE(idle.ReadUntil([](const tae::v1::TaedMessage&) { return false; }));
  idle.Register("rogue-1");  // a write to the ended stream goes nowhere
  Stream again(cluster, rogue_key);
  again.Register("rogue-1");
  CHECK_FALSE(again.ReadUntil([](const tae::v1::TaedMessage& m) { return m.has_registered(); }));
  CHECK(StateOf(cluster, "rogue-1") == "revoked");
  // The holder is not affected.
  CHECK(owner.Manifest(start.snapshot_id()).ok());
}

// Registers `stream` as `id`, waits for the run taed starts there, and reports it started, as an
// agent does; returns the run's id.
int64_t TakeRun(Stream& stream, const std::string& id) {
  REQUIRE(stream.Register(id));
  REQUIRE(stream.ReadUntil([](const tae::v1::TaedMessage& m) { return m.has_start_run(); }));
  const int64_t run = stream.last().start_run().run_id();
  tae::v1::EventBatch started;
  AddEvent(&started, 1, run)->mutable_started()->set_pid(1);
  REQUIRE(stream.SendEvents(started));
  REQUIRE(stream.AckedUpTo(1));
  return run;
}

// Where the checkpoint store keeps blob `hash`.
std::string CheckpointBlobPath(const Cluster& cluster, const std::string& hash) {
  return cluster.home() + "/checkpoints/" + hash.substr(0, 2) + "/" + hash.substr(2);
}

TEST_CASE("what an agent uploads and never commits leaves taed's disk within the upload grant",
          "[security]") {
  // A blob in the store that no checkpoint names, as an earlier taed's uncommitted upload left it.
  const std::string planted = "uploaded before a restart, never committed";
  const std::string planted_hash = snapshot::Sha256Hex(planted);
  setenv("TAE_UPLOAD_GRANT", "2", 1);
  Cluster cluster(0, 1, [&](const std::string& home) {
    const std::string path =
        home + "/checkpoints/" + planted_hash.substr(0, 2) + "/" + planted_hash.substr(2);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << planted;
  });
  unsetenv("TAE_UPLOAD_GRANT");
  REQUIRE(cluster.started());
  // Removed at start, before any agent could upload.
  CHECK_FALSE(std::filesystem::exists(CheckpointBlobPath(cluster, planted_hash)));

  std::filesystem::create_directories(cluster.dir().path() + "/job");
  cluster.dir().Write("job/run.sh", "echo never run here\n");
  const std::string spec = cluster.dir().Write(
      "one.toml",
      "name = \"one\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\ncommand = \"sh run.sh\"\n");
  REQUIRE(cluster.Taectl({"submit", spec}).exit_code == 0);
  Calls enrolment(cluster, FirstLine(cluster.home() + "/agent.token"));
  std::string key;
  REQUIRE(enrolment.Enrol("uploader", &key).ok());
  Stream stream(cluster, key);
  const int64_t run = TakeRun(stream, "uploader");
  Calls agent(cluster, key);
  const std::string kept = "a committed checkpoint";
  REQUIRE(agent.Checkpoint(run, kept).ok());
  // Offered and uploaded in full, then never committed.
  const std::string abandoned = "uploaded, never committed";
  const std::string abandoned_hash = snapshot::Sha256Hex(abandoned);
  REQUIRE(agent.Offer(run, Calls::OneFile(abandoned)).ok());
  REQUIRE(agent.Put(abandoned).ok());
  CHECK(std::filesystem::exists(CheckpointBlobPath(cluster, abandoned_hash)));
  // Gone within the grant (2 s) and one reclaim period (0.5 s), with margin for a loaded machine.
  CHECK(WaitUntil(
      [&] { return !std::filesystem::exists(CheckpointBlobPath(cluster, abandoned_hash)); }, 60));
  const std::string log = ReadFile(cluster.home() + "/logs/taed.log");
  CHECK(log.find("removed 1 checkpoint blobs (" + std::to_string(abandoned.size()) +
                 " bytes) that agents uploaded but no commit named") != std::string::npos);
  CHECK(log.find("removed 1 checkpoint blobs (" + std::to_string(planted.size()) +
                 " bytes) that no checkpoint names") != std::string::npos);
  // The committed checkpoint's blob stays, and a late commit of the abandoned one is refused.
  CHECK(std::filesystem::exists(CheckpointBlobPath(cluster, snapshot::Sha256Hex(kept))));
  std::string got;
  CHECK(agent.Fetch(snapshot::Sha256Hex(kept), true, &got).ok());
  CHECK(got == kept);
  CHECK(agent.Commit(run, Calls::OneFile(abandoned)).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_CASE("a blob fetch in flight ends at the next chunk once its agent's credential is revoked",
          "[security]") {
  Cluster cluster(0, 1);
  REQUIRE(cluster.started());
  // A run whose code holds one large file: its fetch is many 1 MiB chunks.
  std::string weights(96u << 20, '\0');
  for (size_t i = 0; i < weights.size(); ++i) {
    weights[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  cluster.dir().Write("job/run.sh", "echo never run here\n");
  cluster.dir().Write("job/weights.bin", weights);
  const std::string spec = cluster.dir().Write(
      "big.toml",
      "name = \"big\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\ncommand = \"sh run.sh\"\n");
  REQUIRE(cluster.Taectl({"submit", spec}).exit_code == 0);
  Calls enrolment(cluster, FirstLine(cluster.home() + "/agent.token"));
  std::string key;
  REQUIRE(enrolment.Enrol("holder", &key).ok());
  Stream holder(cluster, key);
  TakeRun(holder, "holder");
  // The fetch starts as the holder's own; mid-way, the holder is revoked.
  auto stub = tae::v1::AgentLink::NewStub(Dial(cluster));
  grpc::ClientContext ctx;
  Prepare(&ctx, key);
  tae::v1::FetchBlobsRequest request;
  request.add_hashes(snapshot::Sha256Hex(weights));
  auto reader = stub->FetchBlobs(&ctx, request);
  tae::v1::FetchBlobsChunk chunk;
  REQUIRE(reader->Read(&chunk));
  uint64_t got = chunk.data().size();
  CHECK(chunk.total_size() == weights.size());
  CommandResult revoked = cluster.Taectl({"agents", "revoke", "holder", "lost its laptop"});
  REQUIRE(revoked.exit_code == 0);
  while (reader->Read(&chunk)) {
    got += chunk.data().size();
  }
  const grpc::Status finished = reader->Finish();
  INFO(finished.error_message() << "; " << got << " of " << weights.size() << " bytes");
  CHECK(finished.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(got < weights.size());
}

// Whether taed registers `id` on a fresh stream with `key` and these labels and slots.
bool Registers(const Cluster& cluster, const std::string& key, const std::string& id,
               const std::map<std::string, std::string>& labels, int slots = 1) {
  Stream stream(cluster, key);
  stream.Register(id, 0, labels, slots);
  return stream.ReadUntil([](const tae::v1::TaedMessage& m) { return m.has_registered(); });
}

TEST_CASE(
    "a rogue agent cannot claim a slice of agents taed started, a held worker, a provider's "
    "labels or absurd slots, and an enrolled agent keeps the placement it first registered with",
    "[security]") {
  // taed's two local agents are one slice, "local" (workers 0 and 1).
  Cluster cluster(2, 1, nullptr, {"--slice", "local"});
  REQUIRE(cluster.started());
  REQUIRE(WaitUntil([&] { return StateOf(cluster, "local-1") == "ready"; }, 60));
  Calls enrolment(cluster, FirstLine(cluster.home() + "/agent.token"));
  std::string rogue;
  std::string hand0;
  std::string hand1;
  REQUIRE(enrolment.Enrol("rogue-1", &rogue).ok());
  REQUIRE(enrolment.Enrol("hand-0", &hand0).ok());
  REQUIRE(enrolment.Enrol("hand-1", &hand1).ok());

  // Rank 0 of taed's slice (its MASTER_ADDR), or a worker it lacks: refused.
  CHECK_FALSE(Registers(cluster, rogue, "rogue-1",
                        {{"slice", "local"}, {"worker", "0"}, {"addr", "10.6.6.6"}}));
  CHECK_FALSE(Registers(cluster, rogue, "rogue-1", {{"slice", "local"}, {"worker", "2"}}));
  // A provider's accounting labels.
  CHECK_FALSE(Registers(cluster, rogue, "rogue-1", {{"provider", "local"}}));
  CHECK_FALSE(Registers(cluster, rogue, "rogue-1", {{"pool", "v5e"}}));
  // Slots out of range.
  CHECK_FALSE(Registers(cluster, rogue, "rogue-1", {}, 0));
  CHECK_FALSE(Registers(cluster, rogue, "rogue-1", {}, 1 << 30));
  CHECK(StateOf(cluster, "rogue-1").empty());  // never registered
  // The slice is still taed's two agents.
  for (const nlohmann::json& agent : cluster.TaectlJson({"agents"})) {
    INFO(agent.dump());
    if (agent.at("labels").value("slice", "") == "local") {
      CHECK(absl::StartsWith(agent.at("id").get<std::string>(), "local-"));
    }
  }
  const std::string log = ReadFile(cluster.home() + "/logs/taed.log");
  CHECK(log.find("agent rogue-1: slice local is made of agents taed started") != std::string::npos);

  // A slice of the user's own, started by hand: a worker joins, a held worker cannot be taken,
  // and a worker cannot move once it has registered.
  CHECK(Registers(cluster, hand0, "hand-0", {{"slice", "mine"}, {"worker", "0"}}));
  CHECK_FALSE(Registers(cluster, hand1, "hand-1", {{"slice", "mine"}, {"worker", "0"}}));
  CHECK(Registers(cluster, hand1, "hand-1", {{"slice", "mine"}, {"worker", "1"}}));
  CHECK_FALSE(Registers(cluster, hand0, "hand-0", {{"slice", "mine"}, {"worker", "2"}}));
  CHECK(Registers(cluster, hand0, "hand-0", {{"slice", "mine"}, {"worker", "0"}}));
  // The rogue, with labels it may have, is an agent like any other.
  CHECK(Registers(cluster, rogue, "rogue-1", {{"accelerator", "cpu"}}));
}

TEST_CASE("a job's output that is not UTF-8 reaches taectl logs with U+FFFD", "[security]") {
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  cluster.dir().Write("job/run.sh", "printf 'bad \\377 utf8\\n'\necho 'a good line'\n");
  const std::string spec = cluster.dir().Write(
      "bytes.toml",
      "name = \"bytes\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\ncommand = \"sh run.sh\"\n");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "120"}, 150);
  INFO(waited.out << waited.err);
  CHECK(waited.exit_code == 0);
  const int64_t run = cluster.TaectlJson({"runs", exp}).at(0).at("id");
  CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(run)});
  INFO(logs.out);
  CHECK(logs.out.find("bad \xEF\xBF\xBD utf8") != std::string::npos);
  CHECK(logs.out.find("a good line") != std::string::npos);
}

}  // namespace
}  // namespace tae::testing
