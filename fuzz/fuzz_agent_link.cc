// libFuzzer target for what an agent sends taed: event batches, raw AgentMessages, checkpoint
// offers and commits, upload chunks, and snapshot, blob and checkpoint reads, through the real
// conversion (server/rpc/convert.h, UploadGrants) and the real controller and ingest path
// (Controller::OnEvents, Store::Ingest, server/lifecycle) into an in-memory store seeded with
// five runs.
//
// The world: agent "fuzz-agent" (the rogue, whose credential the input speaks with) holds r1
// (with a code snapshot), r2 (resources.retry_on = "any") and rank 0 of the 2-host gang r3;
// "other-agent" holds rank 1 of r3 and r4 (with its own snapshot and a stored checkpoint); r5
// waits in the queue. Every input starts from the same seeded store (Store::ResetToSeed) and a
// new controller with no agent registered (what an agent may touch is decided from the store),
// so a finding replays alone.
//
// The input is a sequence of operations, each chosen by one byte (see Op below); the values
// they carry (run ids, attempts, seqs, metric values, texts) come from the following bytes,
// with the interesting ones (NaN, +-inf, huge steps, invalid UTF-8, other runs' ids) one byte
// away.
//
// Properties, each an abort() with its name:
//  - Every batch is taken and acked: OnEvents returns OK and the agent's channel gets an ack of
//    the batch's last seq. A bad event or value is dropped, never the batch (it would wedge the
//    agent, which resends forever).
//  - The rogue touches only its own runs: r4 and r5 (not its) keep their row, transitions,
//    metrics, logs and checkpoints, byte for byte.
//  - Every stored log line is valid UTF-8, and every stored metric value is a number.
//  - A read of another run's snapshot, snapshot blob or checkpoint blob gets the same answer as
//    a read of one that does not exist.
//  - No upload is granted beyond what an accepted offer asked for.
//  - A commit cannot claim a blob another run stored by naming its hash (the read property
//    above catches it: the blob would become readable). Only blobs the rogue uploaded in full,
//    in order, under a grant (UploadGrants::Held) count as its own; the one it can upload is
//    kOwnBytes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "common/snapshot/snapshot.h"
#include "server/controller/controller.h"
#include "server/lifecycle/lifecycle.h"
#include "server/rpc/blob_rpcs.h"
#include "server/rpc/convert.h"
#include "server/rpc/upload_grants.h"
#include "server/store/store.h"
#include "spdlog/spdlog.h"
#include "tae/v1/agent_link.pb.h"

namespace {

using tae::controller::Controller;
using tae::model::RunState;

constexpr char kRogue[] = "fuzz-agent";
constexpr char kOther[] = "other-agent";
constexpr double kStart = 1.0e6;  // the fixed clock's first reading

void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_agent_link: property violated: %s\n%s\n", what, detail.c_str());
  std::abort();
}

// Reads the input front to back; past its end every read is 0.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint8_t U8() { return at_ < size_ ? data_[at_++] : 0; }
  uint64_t U64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
      v = (v << 8) | U8();
    }
    return v;
  }
  std::string Text(size_t max) {
    size_t n = U8();
    if (n == 255) {
      n = static_cast<size_t>(U8()) << 8 | U8();  // up to 64 KiB: past the log line cap
    }
    n = std::min({n, max, size_ - std::min(at_, size_)});
    std::string out(reinterpret_cast<const char*>(data_ + std::min(at_, size_)), n);
    at_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// An agent channel that keeps what taed sends the agent.
class Channel : public tae::registry::AgentChannel {
 public:
  void Send(const tae::v1::TaedMessage& message) override {
    if (message.has_ack()) {
      last_ack = message.ack().seq();
    }
  }
  void Close() override { closed = true; }
  uint64_t last_ack = 0;
  bool closed = false;
};

std::string Hash(char c) { return std::string(64, c); }

// "mode size sha256 path" lines of one file.
std::string Manifest(const std::string& hash, const std::string& path) {
  return absl::StrCat("0644 10 ", hash, " ", path, "\n");
}

struct World {
  std::unique_ptr<tae::store::Store> store;
  std::string own_snapshot, other_snapshot;
  double now = kStart;

  World() {
    spdlog::set_level(spdlog::level::off);
    store = std::move(tae::store::Store::Open(":memory:").value());
    own_snapshot = PutSnapshot(Hash('a'), "train.py");
    other_snapshot = PutSnapshot(Hash('b'), "secret.py");
    tae::model::NewExperiment exp;
    exp.name = "fuzz";
    exp.spec_hash = "fuzz";
    exp.spec_text = "name = \"fuzz\"";
    exp.report.metrics = {"train/loss"};
    auto run = [&](int seed, const std::string& snapshot) {
      tae::model::NewRun r{"baseline", seed, "{}", {}};
      r.resources.snapshot_id = snapshot;
      r.resources.command = "python3 train.py";
      r.resources.max_attempts = 2;
      return r;
    };
    exp.runs.push_back(run(1, own_snapshot));    // r1: the rogue's
    exp.runs.push_back(run(2, ""));              // r2: the rogue's, retried on any failure
    exp.runs.back().resources.retry_on = "any";  //
    exp.runs.push_back(run(3, own_snapshot));    // r3: a gang, rank 0 the rogue's
    exp.runs.back().resources.hosts = 2;         //
    exp.runs.push_back(run(4, other_snapshot));  // r4: the other agent's
    exp.runs.push_back(run(5, other_snapshot));  // r5: queued
    exp.runs.back().resources.labels = {{"pool", "none"}};
    (void)store->CreateExperiment(exp, kStart).value();
    Place(1, {kRogue});
    Place(2, {kRogue});
    Place(3, {kRogue, kOther});
    Place(4, {kOther});
    // Running, with points and lines; r4 also with a stored checkpoint.
    boost::asio::io_context core;
    Controller controller(&core, store.get(), Options());
    auto other = std::make_shared<Channel>();
    Register(&controller, kOther, other);
    std::vector<tae::model::IngestEvent> events;
    uint64_t seq = 0;
    for (int64_t r : {3, 4}) {
      events.push_back(Started(++seq, r));
      events.push_back(Line(++seq, r, "other's line"));
      events.push_back(Point(++seq, r, 1, 1.5));
    }
    (void)controller.OnEvents(kOther, other.get(), events, seq).ok();
    auto offer =
        tae::rpc::ParseCheckpointOffer(4, 1, 10, Manifest(Hash('c'), "ckpt.pt"), "").value();
    const int64_t id = controller.BeginCheckpoint(offer, kOther, {Hash('c')}).value();
    (void)controller.CompleteCheckpoint(4, id).value();
    events.clear();
    seq = 0;
    for (int64_t r : {1, 2, 3}) {
      events.push_back(Started(++seq, r));
      events.push_back(Point(++seq, r, 1, 2.0));
    }
    auto rogue = std::make_shared<Channel>();
    Register(&controller, kRogue, rogue);
    (void)controller.OnEvents(kRogue, rogue.get(), events, seq).ok();
    for (int64_t r = 1; r <= 4; ++r) {
      if (store->GetRun(r).value().state != RunState::kRunning) {
        Fail("seeding", absl::StrCat("r", r, " is not running"));
      }
    }
    if (!store->LatestCheckpoint(4).value().has_value()) {
      Fail("seeding", "r4 has no checkpoint");
    }
    if (absl::Status s = store->MarkSeed(); !s.ok()) {
      Fail("seeding", s.ToString());
    }
  }

  tae::controller::Options Options() {
    tae::controller::Options options;
    options.clock = [this] { return now; };
    options.report_tail_s = 60;
    options.checkpoint_tail_s = 600;
    return options;
  }

  std::string PutSnapshot(const std::string& hash, const std::string& path) {
    const std::string manifest = Manifest(hash, path);
    const auto entries = tae::snapshot::ParseManifest(manifest).value();
    tae::model::SnapshotRecord s{
        tae::snapshot::SnapshotId(entries), manifest, 1, 10, "fuzz", kStart};
    (void)store->PutSnapshot(s).ok();
    return s.id;
  }

  void Place(int64_t run, std::vector<std::string> agents) {
    (void)store->Transition(run, tae::lifecycle::Assign(std::move(agents), kStart)).value();
  }

  static tae::model::IngestEvent Started(uint64_t seq, int64_t run) {
    tae::model::IngestEvent e;
    e.kind = tae::model::IngestEvent::Kind::kStarted;
    e.seq = seq;
    e.run_id = run;
    e.attempt = 1;
    e.pid = 100 + run;
    e.wall_time = kStart;
    return e;
  }
  static tae::model::IngestEvent Line(uint64_t seq, int64_t run, const std::string& text) {
    tae::model::IngestEvent e;
    e.seq = seq;
    e.run_id = run;
    e.attempt = 1;
    e.stream = "stdout";
    e.text = text;
    e.wall_time = kStart;
    return e;
  }
  static tae::model::IngestEvent Point(uint64_t seq, int64_t run, int64_t step, double value) {
    tae::model::IngestEvent e;
    e.kind = tae::model::IngestEvent::Kind::kMetrics;
    e.seq = seq;
    e.run_id = run;
    e.attempt = 1;
    e.step = step;
    e.values = {{"train/loss", value}};
    e.wall_time = kStart;
    return e;
  }

  static void Register(Controller* controller, const std::string& id,
                       std::shared_ptr<Channel> channel) {
    tae::controller::AgentHello hello;
    hello.agent.id = id;
    hello.agent.slots = id == kRogue ? 3 : 2;
    hello.agent.labels = {{"accelerator", "cpu"}};
    if (id == kRogue) {
      hello.held = {{1, 1}, {2, 1}, {3, 1}};
    } else {
      hello.held = {{3, 1}, {4, 1}};
    }
    controller->OnRegister(std::move(channel), std::move(hello));
  }
};

World& TheWorld() {
  static World* world = new World();  // lives for the process
  return *world;
}

// Everything stored about runs 4 and 5, which the rogue does not hold.
std::string NotItsOwn(tae::store::Store* store) {
  std::string out;
  auto rows = [&](const char* sql) {
    tae::store::Statement& stmt = *store->db()->Cached(sql).value();
    while (stmt.Step().value()) {
      for (int c = 0; c < stmt.Columns(); ++c) {
        absl::StrAppend(&out, stmt.IsNull(c) ? "NULL" : stmt.Text(c), "|");
      }
      out += "\n";
    }
  };
  rows("SELECT * FROM runs WHERE id = 4");
  // The queued run's reason says why it waits, which the scheduler rewrites as the fleet changes.
  rows("SELECT id, state, attempt, agent_id, max_attempts, not_before FROM runs WHERE id = 5");
  rows("SELECT * FROM run_transitions WHERE run_id IN (4, 5) ORDER BY rowid");
  rows("SELECT * FROM metrics WHERE run_id IN (4, 5) ORDER BY run_id, key_id, step");
  rows("SELECT * FROM run_summaries WHERE run_id IN (4, 5) ORDER BY run_id, key_id");
  rows("SELECT * FROM logs WHERE run_id IN (4, 5) ORDER BY id");
  rows("SELECT * FROM checkpoints WHERE run_id IN (4, 5) ORDER BY id");
  rows("SELECT * FROM run_hosts WHERE run_id IN (4, 5) ORDER BY run_id, rank");
  return out;
}

double Value(Bytes* in) {
  switch (in->U8() % 8) {
    case 0:
      return std::numeric_limits<double>::quiet_NaN();
    case 1:
      return std::numeric_limits<double>::infinity();
    case 2:
      return -std::numeric_limits<double>::infinity();
    case 3:
      return std::numeric_limits<double>::max();
    case 4:
      return std::numeric_limits<double>::denorm_min();
    case 5: {
      const uint64_t bits = in->U64();  // any bit pattern, signalling NaNs included
      double v;
      std::memcpy(&v, &bits, sizeof v);
      return v;
    }
    default:
      return static_cast<double>(in->U8()) / 16.0;
  }
}

int64_t RunId(Bytes* in) {
  const uint8_t b = in->U8();
  switch (b % 9) {
    case 6:
      return 0;
    case 7:
      return -1;
    case 8:
      return static_cast<int64_t>(in->U64());
    default:
      return b % 9 + 1;  // 1..6: its own, the gang, the other's, the queued one, none
  }
}

int Attempt(Bytes* in) {
  const uint8_t b = in->U8();
  return b < 200 ? 1 : b < 230 ? 2 : b < 250 ? 0 : -static_cast<int>(b);
}

std::string Key(Bytes* in) {
  static const char* kKeys[] = {"train/loss", "eval/loss", "eval/acc", "sys/cpu", "",
                                "step",       "a b",       "x/\xff",   "meta"};
  const uint8_t b = in->U8();
  return b < 9 ? kKeys[b] : b < 128 ? absl::StrCat("k", b) : in->Text(300);
}

// Ten bytes the rogue holds (a manifest line says 10 bytes): it can show it holds this blob.
constexpr char kOwnBytes[] = "own bytes!";

std::string Hash64(Bytes* in) {
  const uint8_t b = in->U8();
  if (b >= 250) {
    return tae::snapshot::Sha256Hex(kOwnBytes);  // the rogue's own
  }
  switch (b % 5) {
    case 0:
      return Hash('a');  // its own snapshot's
    case 1:
      return Hash('b');  // the other run's snapshot's
    case 2:
      return Hash('c');  // the other run's checkpoint's
    case 3:
      return Hash('d');  // nobody's
    default:
      return in->Text(80);
  }
}

void AddEvent(Bytes* in, uint64_t* seq, tae::v1::EventBatch* batch) {
  tae::v1::Event* e = batch->add_events();
  const uint8_t s = in->U8();
  e->set_seq(s < 240 ? ++*seq : s < 250 ? *seq : in->U64());
  e->set_run_id(RunId(in));
  e->set_attempt(Attempt(in));
  e->set_wall_time(in->U8() < 220 ? kStart : Value(in));
  switch (in->U8() % 6) {
    case 0: {
      auto* m = e->mutable_metrics();
      const uint8_t step = in->U8();
      m->set_step(step < 200 ? step : step < 250 ? -step : static_cast<int64_t>(in->U64()));
      for (int n = in->U8() % 6; n > 0; --n) {
        auto* v = m->add_values();
        v->set_key(Key(in));
        v->set_value(Value(in));
      }
      break;
    }
    case 1: {
      auto* log = e->mutable_log();
      const uint8_t stream = in->U8();
      log->set_stream(stream < 100 ? "stdout" : stream < 200 ? "stderr" : in->Text(16));
      log->set_text(in->Text(70000));
      break;
    }
    case 2:
      e->mutable_started()->set_pid(static_cast<int64_t>(in->U64()));
      break;
    case 3: {
      auto* x = e->mutable_exited();
      const uint8_t code = in->U8();
      x->set_exit_code(code < 128 ? code % 4 : static_cast<int32_t>(in->U64()));
      const uint8_t flags = in->U8();
      x->set_signal(flags & 1 ? 9 : 0);
      x->set_cancelled(flags & 2);
      x->set_interrupted(flags & 4);
      x->set_infra(flags & 8);
      x->set_not_started(flags & 16);
      x->set_reason(in->Text(70000));
      break;
    }
    case 4: {
      auto* meta = e->mutable_meta()->mutable_values();
      for (int n = in->U8() % 4; n > 0; --n) {
        (*meta)[Key(in)] = in->Text(2000);
      }
      break;
    }
    default:
      break;  // no kind
  }
}

// The checks a read makes, and that "not yours" reads the same as "does not exist".
void Reads(Controller* controller, Bytes* in) {
  const auto missing = controller->MayReadSnapshot(kRogue, Hash('e'));
  const auto others = controller->MayReadSnapshot(kRogue, TheWorld().other_snapshot);
  if (others.ok() || others != missing) {
    Fail("another run's snapshot reads unlike a missing one", others.ToString());
  }
  const bool checkpoints = in->U8() & 1;
  const auto nobody = controller->MayFetchBlobs(kRogue, checkpoints, {Hash('d')});
  const auto theirs =
      controller->MayFetchBlobs(kRogue, checkpoints, {checkpoints ? Hash('c') : Hash('b')});
  if (theirs.ok() || theirs != nobody) {
    Fail("another run's blob reads unlike a missing one", theirs.ToString());
  }
  std::vector<std::string> hashes;
  for (int n = in->U8() % 4; n > 0; --n) {
    hashes.push_back(Hash64(in));
  }
  (void)controller->MayFetchBlobs(kRogue, checkpoints, hashes);
  (void)controller->MayReadSnapshot(kRogue, in->Text(80));
}

void CheckStored(tae::store::Store* store) {
  tae::store::Statement& lines = *store->db()->Cached("SELECT line FROM logs").value();
  while (lines.Step().value()) {
    const std::string line = lines.Text(0);
    if (!tae::snapshot::IsValidUtf8(line)) {
      Fail("a stored log line is not UTF-8", line.substr(0, 200));
    }
  }
  tae::store::Statement& values = *store->db()->Cached("SELECT typeof(value) FROM metrics").value();
  while (values.Step().value()) {
    if (values.Text(0) != "real") {
      Fail("a stored metric value is not a number", values.Text(0));
    }
  }
}

enum class Op : uint8_t {
  kBatch,       // a batch of events, built field by field
  kRawMessage,  // an AgentMessage parsed from raw bytes, as the stream reads it
  kCheckpoint,  // an offer (grants) and a commit
  kUpload,      // a PutCheckpointBlobs request's chunks, checked against the grants
  kReads,       // manifests and blobs
  kProfile,     // ProfileFailed
  kLiveness,    // heartbeat, draining, a fault, a re-register, time passing
  kCount,
};

void OnEvents(Controller* controller, Channel* channel, const tae::v1::EventBatch& batch,
              double now) {
  std::vector<tae::model::IngestEvent> events;
  const uint64_t last_seq = tae::rpc::FromProto(batch, now, &events);
  if (absl::Status s = controller->OnEvents(kRogue, channel, events, last_seq); !s.ok()) {
    Fail("a batch was not taken", s.ToString());
  }
  if (last_seq > 0 && channel->last_ack != last_seq) {
    Fail("a batch was not acked", absl::StrCat(channel->last_ack, " != ", last_seq));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& world = TheWorld();
  if (absl::Status s = world.store->ResetToSeed(); !s.ok()) {
    Fail("reset", s.ToString());
  }
  static const std::string kBefore = NotItsOwn(world.store.get());
  const int64_t changes = world.store->db()->total_changes();
  world.now = kStart + 1;
  // Its own core: the timers a controller leaves pending go with it.
  boost::asio::io_context core;
  Controller controller(&core, world.store.get(), world.Options());
  // No agent is registered: what an agent may touch is decided from the store (the runs placed
  // on it), not from its connection; registering (an op below) is fuzzed like the rest.
  auto channel = std::make_shared<Channel>();
  tae::rpc::UploadGrants grants;
  std::map<std::string, uint64_t> granted;  // what accepted offers asked for
  uint64_t seq = 100;
  Bytes in(data, size);
  for (int ops = 0; !in.empty() && ops < 64; ++ops) {
    switch (static_cast<Op>(in.U8() % static_cast<uint8_t>(Op::kCount))) {
      case Op::kBatch: {
        tae::v1::EventBatch batch;
        for (int n = 1 + in.U8() % 8; n > 0; --n) {
          AddEvent(&in, &seq, &batch);
        }
        OnEvents(&controller, channel.get(), batch, world.now);
        break;
      }
      case Op::kRawMessage: {
        tae::v1::AgentMessage message;
        const std::string bytes = in.Text(4096);
        if (!message.ParseFromString(bytes)) {
          break;
        }
        if (message.has_events() &&
            message.events().events_size() <= tae::rpc::kMaxEventsPerBatch) {
          OnEvents(&controller, channel.get(), message.events(), world.now);
        } else if (message.has_profile_failed()) {
          const auto& f = message.profile_failed();
          controller.OnProfileFailed(kRogue, f.run_id(), f.attempt(), f.id(), f.error());
        }
        break;
      }
      case Op::kCheckpoint: {
        const int64_t run = RunId(&in);
        const int attempt = Attempt(&in);
        const int64_t step = in.U8() < 250 ? in.U8() : static_cast<int64_t>(in.U64());
        std::string manifest;
        for (int n = in.U8() % 3; n > 0; --n) {
          manifest += in.U8() < 200 ? Manifest(Hash64(&in), in.Text(40)) : in.Text(300);
        }
        const std::string artifact = in.U8() < 200 ? "" : in.Text(40);
        std::map<std::string, uint64_t> sizes;
        auto offer = tae::rpc::ParseCheckpointOffer(run, attempt, step, manifest, artifact, &sizes);
        if (!offer.ok() || !controller.CheckCheckpoint(*offer, kRogue).ok()) {
          break;
        }
        if (grants.Grant(kRogue, sizes, world.now).ok()) {
          granted.insert(sizes.begin(), sizes.end());
        }
        if (in.U8() & 1) {
          auto id = controller.BeginCheckpoint(*offer, kRogue,
                                               grants.Held(kRogue, offer->hashes, world.now));
          if (id.ok()) {
            if (in.U8() & 1) {
              (void)controller.CompleteCheckpoint(run, *id);
            } else {
              (void)controller.AbandonCheckpoint(*id);
            }
          }
        }
        break;
      }
      case Op::kUpload: {
        tae::v1::PutCheckpointBlobsRequest request;
        for (int n = 1 + in.U8() % 3; n > 0; --n) {
          auto* chunk = request.add_chunks();
          if (in.U8() < 64) {  // a piece of the bytes it holds
            const size_t offset = in.U8() % 11;
            chunk->set_hash(tae::snapshot::Sha256Hex(kOwnBytes));
            chunk->set_offset(offset);
            chunk->set_total_size(10);
            chunk->set_data(std::string(kOwnBytes + offset, in.U8() % (11 - offset)));
            continue;
          }
          chunk->set_hash(Hash64(&in));
          chunk->set_offset(in.U8() < 200 ? 0 : in.U64());
          chunk->set_total_size(in.U8() < 200 ? 10 : in.U64());
          chunk->set_data(in.Text(64));
        }
        const bool taken = tae::rpc::CheckChunks(request.chunks()).ok() &&
                           grants.Accept(kRogue, request.chunks(), world.now).ok();
        if (taken) {
          for (const auto& chunk : request.chunks()) {
            auto it = granted.find(chunk.hash());
            if (it == granted.end() || it->second != chunk.total_size()) {
              Fail("an upload taken that no offer asked for", chunk.hash().substr(0, 80));
            }
          }
        }
        break;
      }
      case Op::kReads:
        Reads(&controller, &in);
        break;
      case Op::kProfile:
        controller.OnProfileFailed(kRogue, RunId(&in), Attempt(&in), in.Text(16), in.Text(64));
        break;
      case Op::kLiveness:
        switch (in.U8() % 5) {
          case 0:
            controller.OnHeartbeat(kRogue);
            break;
          case 1:
            controller.OnDraining(kRogue);
            break;
          case 2:
            controller.OnAgentFault(kRogue, in.Text(100));
            break;
          case 3:
            channel = std::make_shared<Channel>();
            World::Register(&controller, kRogue, channel);
            break;
          default:
            world.now += static_cast<double>(in.U8()) * 10;  // past the tails, at most 2550 s
            break;
        }
        break;
      case Op::kCount:
        break;
    }
  }
  if (world.store->db()->total_changes() == changes) {
    return 0;  // nothing stored: nothing to check
  }
  if (NotItsOwn(world.store.get()) != kBefore) {
    Fail("runs the rogue does not hold changed", NotItsOwn(world.store.get()));
  }
  CheckStored(world.store.get());
  return 0;
}
