// taectl mount / snapshots / scrap: code snapshots (docs/snapshots.md).

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands/commands.h"
#include "client/commands/common.h"
#include "client/commands/mount.h"
#include "client/output/table.h"
#include "common/blobs/transfer.h"
#include "common/cli/flags.h"
#include "common/snapshot/snapshot.h"
#include "common/status/macros.h"
#include "nlohmann/json.hpp"

namespace tae::client {
namespace {

constexpr size_t kRequestBytes = 4 << 20;  // data per PutBlobs call
constexpr int kHashesPerCall = 50000;
constexpr int kUploadTimeoutMs = 300000;

std::string HashCachePath(const std::string& home, const std::string& root) {
  return absl::StrCat(home, "/hashcache/", snapshot::Sha256Hex(root).substr(0, 16));
}

// Uploads what taed lacks. `known`: hashes taed had at the last successful mount of this tree
// (not asked about again; if one has gone since, CreateSnapshot says so and the caller retries
// with `known` empty).
absl::Status Upload(ControlClient& client, const std::string& root,
                    const std::vector<snapshot::Entry>& files,
                    const std::unordered_set<std::string>& known, MountResult* result,
                    const std::function<void(const std::string&)>& progress) {
  // Which blobs taed lacks, in batches.
  std::unordered_map<std::string, const snapshot::Entry*> by_hash;
  std::vector<std::string> hashes;
  for (const snapshot::Entry& entry : files) {
    if (known.count(entry.sha256) == 0 && by_hash.emplace(entry.sha256, &entry).second) {
      hashes.push_back(entry.sha256);
    }
  }
  std::vector<const snapshot::Entry*> missing;
  uint64_t missing_bytes = 0;
  for (size_t i = 0; i < hashes.size(); i += kHashesPerCall) {
    tae::v1::MissingBlobsRequest request;
    for (size_t j = i; j < std::min(hashes.size(), i + kHashesPerCall); ++j) {
      request.add_hashes(hashes[j]);
    }
    tae::v1::MissingBlobsResponse response;
    RETURN_IF_ERROR(client.Check(client.stub()->MissingBlobs(
        ControlClient::Context(kUploadTimeoutMs).get(), request, &response)));
    for (const std::string& hash : response.missing()) {
      auto it = by_hash.find(hash);
      if (it == by_hash.end()) {
        return absl::InternalError("taed named a blob that was not asked about");
      }
      missing.push_back(it->second);
      missing_bytes += it->second->size;
    }
  }
  // Upload, packing small files into one call and splitting big ones.
  return blobs::SendFiles(root, missing, kRequestBytes, [&](blobs::Chunks* chunks) {
    tae::v1::PutBlobsRequest request;
    request.mutable_chunks()->Swap(chunks);
    tae::v1::PutBlobsResponse response;
    RETURN_IF_ERROR(client.Check(client.stub()->PutBlobs(
        ControlClient::Context(kUploadTimeoutMs).get(), request, &response)));
    result->blobs_uploaded += response.blobs_completed();
    result->bytes_uploaded += response.bytes_written();
    if (progress) {
      progress(absl::StrCat("uploading: ", FormatBytes(result->bytes_uploaded), " of ",
                            FormatBytes(missing_bytes), " (", result->blobs_uploaded, " of ",
                            missing.size(), " files)"));
    }
    return absl::OkStatus();
  });
}

}  // namespace

std::function<void(const std::string&)> StderrProgress() {
  if (!isatty(STDERR_FILENO)) {
    return nullptr;
  }
  return [](const std::string& line) { std::fprintf(stderr, "\r\033[K%s", line.c_str()); };
}

absl::StatusOr<MountResult> MountTree(ControlClient& client, const std::string& dir,
                                      const std::function<void(const std::string&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  char resolved[PATH_MAX];
  if (realpath(dir.c_str(), resolved) == nullptr) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  }
  MountResult result;
  result.root = resolved;
  if (progress) {
    progress(absl::StrCat("hashing ", result.root, " ..."));
  }
  const std::string cache_path = HashCachePath(client.home(), result.root);
  snapshot::HashCache cache = snapshot::HashCache::Load(cache_path);
  const size_t loaded_entries = cache.size();

  snapshot::WalkOptions options;
  options.cache = &cache;
  absl::StatusOr<snapshot::Walk> walk = snapshot::WalkTree(result.root, options);
  if (!walk.ok()) {
    return absl::Status(walk.status().code(),
                        absl::StrCat(dir, ": ", std::string(walk.status().message())));
  }
  result.id = cache.WalkMatchesLoaded(walk->files.size()) ? cache.loaded_snapshot_id()
                                                          : snapshot::SnapshotId(walk->files);
  result.files = static_cast<int64_t>(walk->files.size());
  result.bytes = walk->total_bytes;
  result.hashed_bytes = walk->hashed_bytes;
  result.excluded = walk->excluded;

  // Known already: one small call.
  tae::v1::CreateSnapshotRequest create;
  create.set_id(result.id);
  tae::v1::CreateSnapshotResponse created;
  grpc::Status exists =
      client.stub()->CreateSnapshot(ControlClient::Context().get(), create, &created);
  if (!exists.ok() && exists.error_code() != grpc::StatusCode::NOT_FOUND) {
    return client.Check(exists);
  }
  if (!exists.ok()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    create.set_manifest(snapshot::ManifestText(walk->files));
    create.set_source(absl::StrCat(host, ":", result.root));
    const std::vector<std::string> known_list = cache.KnownHashes();
    std::unordered_set<std::string> known(known_list.begin(), known_list.end());
    // Twice at most: a scrap running at the same time may collect blobs uploaded for this
    // snapshot before it is recorded; taed then names them missing and they go up again.
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0) {
        known.clear();  // something taed had is gone (scrapped): ask about every blob
      }
      RETURN_IF_ERROR(Upload(client, result.root, walk->files, known, &result, progress));
      created.Clear();
      grpc::Status status = client.stub()->CreateSnapshot(
          ControlClient::Context(kUploadTimeoutMs).get(), create, &created);
      if (status.ok()) {
        break;
      }
      if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION || attempt == 2) {
        return client.Check(status);
      }
    }
  }
  // Saved only now that taed has every blob of this walk (KnownHashes relies on it), and only
  // when something changed. Not when the walk only re-read a little of what the cache already
  // held (files changed less than a second before the last save are re-read until a save is a
  // second after them): reading those again next time costs less than rewriting the cache.
  constexpr uint64_t kRereadIsCheaperBelow = 1 << 20;
  const bool only_reread =
      cache.WalkMatchesLoaded(walk->files.size()) && walk->hashed_bytes < kRereadIsCheaperBelow;
  if (!only_reread && (cache.misses() > 0 || loaded_entries != walk->files.size() ||
                       cache.loaded_snapshot_id() != result.id)) {
    cache.SetSnapshotId(result.id);
    cache.Save(cache_path).IgnoreError();  // only an optimisation
  }
  result.existing = created.existing() && result.blobs_uploaded == 0;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (progress) {
    progress("");
    std::fprintf(stderr, "\r\033[K");
  }
  return result;
}

int Mount(const CommandEnv& env, const Args& args) {
  bool dry_run = false;
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl mount DIR [--dry-run] [--json]\n\n"
      "Snapshots DIR for runs: walks it honouring .gitignore and .taeignore (and leaving out\n"
      ".git), hashes every file (SHA-256; unchanged files are not read again), uploads to taed\n"
      "only the contents it does not have, and prints the snapshot id. The same tree always\n"
      "gives the same id, whatever the files' times. --dry-run lists what would be included\n"
      "and excluded, and the total size, without contacting taed.");
  flags.Bool("dry-run", &dry_run, "list included and excluded files; upload nothing");
  flags.Bool("json", &json, "print the result as JSON");
  Args dirs;
  int code = ParseOrExit(flags, args, 1, 1, &dirs);
  if (code >= 0) {
    return code;
  }
  if (dry_run) {
    absl::StatusOr<snapshot::Walk> walk = snapshot::WalkTree(dirs[0]);
    if (!walk.ok()) {
      return Fail(absl::Status(walk.status().code(),
                               absl::StrCat(dirs[0], ": ", std::string(walk.status().message()))));
    }
    const std::string id = snapshot::SnapshotId(walk->files);
    if (json) {
      nlohmann::ordered_json out = {{"id", id},
                                    {"files", walk->files.size()},
                                    {"bytes", walk->total_bytes},
                                    {"included", nlohmann::ordered_json::array()},
                                    {"excluded", walk->excluded}};
      for (const snapshot::Entry& entry : walk->files) {
        out["included"].push_back({{"path", entry.path},
                                   {"size", entry.size},
                                   {"mode", absl::StrFormat("%04o", entry.mode)}});
      }
      std::printf("%s\n", out.dump(2).c_str());
      return 0;
    }
    for (const snapshot::Entry& entry : walk->files) {
      std::printf("  + %s (%s)\n", entry.path.c_str(), FormatBytes(entry.size).c_str());
    }
    for (const std::string& path : walk->excluded) {
      std::printf("  - %s\n", path.c_str());
    }
    std::printf("%zu files, %s included; %zu paths excluded (dry run: nothing uploaded)\n",
                walk->files.size(), FormatBytes(walk->total_bytes).c_str(), walk->excluded.size());
    return 0;
  }
  ControlClient client(env.home);
  absl::StatusOr<MountResult> result = MountTree(client, dirs[0], StderrProgress());
  if (!result.ok()) {
    return Fail(result.status());
  }
  if (json) {
    nlohmann::ordered_json out = {{"id", result->id},
                                  {"root", result->root},
                                  {"files", result->files},
                                  {"bytes", result->bytes},
                                  {"hashed_bytes", result->hashed_bytes},
                                  {"blobs_uploaded", result->blobs_uploaded},
                                  {"bytes_uploaded", result->bytes_uploaded},
                                  {"existing", result->existing},
                                  {"excluded", result->excluded.size()},
                                  {"seconds", result->seconds}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::fprintf(stderr, "%ld files, %s; hashed %s, uploaded %d files (%s) in %.2f s%s\n",
               static_cast<long>(result->files), FormatBytes(result->bytes).c_str(),
               FormatBytes(result->hashed_bytes).c_str(), result->blobs_uploaded,
               FormatBytes(result->bytes_uploaded).c_str(), result->seconds,
               result->existing ? " (unchanged: taed had this snapshot)" : "");
  std::printf("%s\n", result->id.c_str());
  return 0;
}

int Snapshots(const CommandEnv& env, const Args& args) {
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl snapshots [--json]\n\n"
      "Lists the code snapshots taed keeps, newest first, with the runs that use them.");
  flags.Bool("json", &json, "print JSON");
  Args rest;
  int code = ParseOrExit(flags, args, 0, 0, &rest);
  if (code >= 0) {
    return code;
  }
  ControlClient client(env.home);
  tae::v1::ListSnapshotsResponse response;
  absl::Status s = client.Check(client.stub()->ListSnapshots(
      ControlClient::Context().get(), tae::v1::ListSnapshotsRequest(), &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    nlohmann::ordered_json out = {{"blobs", response.blobs()},
                                  {"blob_bytes", response.blob_bytes()},
                                  {"snapshots", nlohmann::ordered_json::array()}};
    for (const tae::v1::Snapshot& snap : response.snapshots()) {
      out["snapshots"].push_back({{"id", snap.id()},
                                  {"files", snap.files()},
                                  {"bytes", snap.bytes()},
                                  {"source", snap.source()},
                                  {"created_at", snap.created_at()},
                                  {"runs", snap.runs()},
                                  {"active_runs", snap.active_runs()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  Table table({"SNAPSHOT", "CREATED", "FILES", "SIZE", "RUNS", "SOURCE"});
  for (const tae::v1::Snapshot& snap : response.snapshots()) {
    table.Add({snap.id().substr(0, 12), FormatTime(snap.created_at()), absl::StrCat(snap.files()),
               FormatBytes(static_cast<uint64_t>(snap.bytes())),
               snap.active_runs() > 0
                   ? absl::StrCat(snap.runs(), " (", snap.active_runs(), " active)")
                   : absl::StrCat(snap.runs()),
               snap.source()});
  }
  std::fputs(table.Render().c_str(), stdout);
  std::printf("%d blobs, %s stored\n", response.blobs(),
              FormatBytes(static_cast<uint64_t>(response.blob_bytes())).c_str());
  return 0;
}

// "7d", "12h", "30m", "45s", "90" (seconds) -> seconds.
absl::StatusOr<double> ParseAge(const std::string& text) {
  if (text.empty()) {
    return absl::InvalidArgumentError("--older-than: empty");
  }
  double unit = 1;
  std::string number = text;
  switch (text.back()) {
    case 'd':
      unit = 86400;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'm':
      unit = 60;
      break;
    case 's':
      break;
    default:
      unit = 0;
  }
  if (unit != 0) {
    number.pop_back();
  } else {
    unit = 1;
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !(value > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--older-than ", text, ": expected an age such as 7d, 12h, 30m or 45s"));
  }
  return value * unit;
}

int Scrap(const CommandEnv& env, const Args& args) {
  bool all = false;
  bool dry_run = false;
  bool json = false;
  bool checkpoints = false;
  bool artifacts = false;
  std::string older_than;
  cli::FlagSet flags(
      "usage: taectl scrap SNAPSHOT... | --all | --older-than AGE  [--dry-run] [--json]\n"
      "       taectl scrap --checkpoints|--artifacts RUN|EXPERIMENT... | --all | --older-than "
      "AGE\n\n"
      "Removes code snapshots from taed and from every connected agent's cache, deletes the\n"
      "files they put in finished run directories, and frees the contents no remaining\n"
      "snapshot uses. Snapshots of queued or running runs are kept. SNAPSHOT is an id or a\n"
      "prefix of at least 8 digits (taectl snapshots lists them); AGE is e.g. 7d, 12h, 30m.\n\n"
      "With --checkpoints, removes the checkpoints runs uploaded (taectl checkpoints RUN lists\n"
      "them) and frees the contents no remaining checkpoint uses: of the runs (r12) or\n"
      "experiments named, all, or those stored longer ago than AGE. Those of queued or running\n"
      "runs are kept unless the run itself is named.\n\n"
      "With --artifacts, the same for the artifacts runs stored (profiles; taectl artifacts RUN\n"
      "lists them).");
  flags.Bool("checkpoints", &checkpoints, "remove runs' checkpoints instead of snapshots");
  flags.Bool("artifacts", &artifacts, "remove runs' artifacts (profiles) instead of snapshots");
  flags.Bool("all", &all, "every snapshot");
  flags.String("older-than", &older_than, "snapshots created longer ago than AGE");
  flags.Bool("dry-run", &dry_run, "say what would be removed; remove nothing");
  flags.Bool("json", &json, "print JSON");
  Args ids;
  int code = ParseOrExit(flags, args, 0, 10000, &ids);
  if (code >= 0) {
    return code;
  }
  if (checkpoints && artifacts) {
    return Fail(absl::InvalidArgumentError("--checkpoints, --artifacts: give one of them"));
  }
  tae::v1::ScrapRequest request;
  const int modes = (ids.empty() ? 0 : 1) + (all ? 1 : 0) + (older_than.empty() ? 0 : 1);
  if (modes != 1) {
    return Fail(absl::InvalidArgumentError(
        checkpoints || artifacts
            ? absl::StrCat("scrap --", checkpoints ? "checkpoints" : "artifacts",
                           " needs exactly one of: runs or experiments, --all, --older-than AGE")
            : std::string("scrap needs exactly one of: snapshot ids, --all, --older-than AGE")));
  }
  if (!older_than.empty()) {
    absl::StatusOr<double> age = ParseAge(older_than);
    if (!age.ok()) {
      return Fail(age.status());
    }
    request.set_older_than_s(*age);
  }
  for (const std::string& id : ids) {
    request.add_ids(id);
  }
  request.set_all(all);
  request.set_dry_run(dry_run);
  request.set_checkpoints(checkpoints || artifacts);
  request.set_artifacts(artifacts);
  ControlClient client(env.home);
  tae::v1::ScrapResponse response;
  absl::Status s =
      client.Check(client.stub()->Scrap(ControlClient::Context(120000).get(), request, &response));
  if (!s.ok()) {
    return Fail(s);
  }
  if (json) {
    nlohmann::ordered_json out = {{"removed", response.removed()},
                                  {"kept", response.kept()},
                                  {"blobs_removed", response.blobs_removed()},
                                  {"bytes_freed", response.bytes_freed()},
                                  {"agents_notified", response.agents_notified()},
                                  {"dry_run", dry_run}};
    if (checkpoints || artifacts) {
      out.erase("agents_notified");
      out[artifacts ? "artifacts_removed" : "checkpoints_removed"] = response.checkpoints_removed();
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  for (const std::string& id : response.removed()) {
    std::printf("%s %s\n", dry_run ? "would remove" : "removed", id.c_str());
  }
  for (const std::string& kept : response.kept()) {
    std::printf("kept %s\n", kept.c_str());
  }
  const char* what = artifacts ? "artifacts" : checkpoints ? "checkpoints" : "snapshots";
  if (dry_run) {
    std::printf("%d %s would be removed (dry run)\n", response.removed_size(), what);
  } else if (checkpoints || artifacts) {
    std::printf("%d %s removed; %d blobs (%s) freed on taed\n", response.checkpoints_removed(),
                what, response.blobs_removed(),
                FormatBytes(static_cast<uint64_t>(response.bytes_freed())).c_str());
  } else {
    std::printf("%d snapshots removed; %d blobs (%s) freed on taed; %d agents told\n",
                response.removed_size(), response.blobs_removed(),
                FormatBytes(static_cast<uint64_t>(response.bytes_freed())).c_str(),
                response.agents_notified());
  }
  return 0;
}

}  // namespace tae::client
