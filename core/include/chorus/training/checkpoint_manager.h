// Numbered checkpoints in a directory (tf.train.CheckpointManager), kept safe from what file
// systems, schedulers and users do to them:
//   - Every file (a checkpoint, the index, the owner record) is written under a temporary name
//     unique to its writer (<name>.tmp.<pid>.<random>), synced, renamed into place, and the
//     directory synced. A checkpoint <prefix>-<number> is written first, the index "checkpoint"
//     (model_checkpoint_path: "<prefix>-<number>", as TensorFlow's) last, so the index only ever
//     names a whole file; a failed save leaves the previous index and checkpoints as they were.
//     The temporary files of a writer that died are removed by the next one to claim the
//     directory.
//   - The latest checkpoint is the one the index names when that file is whole (its checksum
//     matches). When the index is missing, empty or unreadable, or names a missing or damaged
//     file, it is the newest whole <prefix>-<number> instead, with a warning that says what was
//     wrong with the index and which files were skipped.
//   - A directory belongs to one job. Its owner record (a file "owner") holds the JobIdentity of
//     the job that wrote there first, and the process that writes holds a lock on it (flock on
//     a file "lock", released when the process ends, however it ends). A job of another identity
//     is refused with both identities and the override (take_over); so is a second writer while
//     one runs, whatever its identity. The same job restarted (the same identity) is welcome: it
//     finds its own checkpoints and resumes from them.
//   - Under a multi-worker strategy every worker constructs the manager and calls Save and
//     Latest at the same points (like Checkpoint::Save, they are collectives). Only the writer
//     (Strategy::should_checkpoint, worker 0) touches the directory, and the outcome of its file
//     work is broadcast: when it fails, the writer throws its own error at once ("worker 0 could
//     not save checkpoint ...: No space left on device") and every other worker throws an error
//     that names the writer and its reason ("worker 0 (the checkpoint writer) could not save
//     checkpoint ...: ..."), instead of waiting for a collective the writer never joins.
#ifndef CHORUS_CHECKPOINT_MANAGER_H_
#define CHORUS_CHECKPOINT_MANAGER_H_

#include <chorus/distribute/variable.h>
#include <chorus/plugin.h>
#include <chorus/runtime/tensor.h>
#include <chorus/training/checkpoint.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

class Strategy;

// What tells one training job's checkpoints from another's: the seed it started from, its
// model (the names, dtypes and shapes of its variables) and its cluster (workers and replicas).
// Any text that tells them apart will do; ModelSignature and ClusterShape give the usual ones.
struct JobIdentity {
  uint64_t seed = 0;
  std::string model;    // ModelSignature(...)
  std::string cluster;  // ClusterShape(...)

  // The identity of a job that trains `variables` from `seed` under `strategy` (nullptr: none).
  static JobIdentity Of(uint64_t seed, const std::vector<Variable>& variables,
                        const Strategy* strategy);
  // "seed 1, model 4 variables of 101770 values (fingerprint 3f...), cluster 1 worker of 2
  // replicas"
  std::string ToString() const;
  bool operator==(const JobIdentity&) const = default;
};

struct VariableSignature {
  std::string name;
  chorus_dtype dtype = CHORUS_F32;
  Shape shape;
};
// "4 variables of 101770 values (fingerprint 0123456789abcdef)": the count, the elements and a
// 64-bit FNV-1a of every name, dtype and shape, in name order (so the order of creation does not
// matter, the names do).
std::string ModelSignature(std::vector<VariableSignature> variables);
std::string ModelSignature(const std::vector<Variable>& variables);
// "1 worker of 4 replicas", "2 workers of 2 replicas each"; "no strategy" for nullptr.
std::string ClusterShape(const Strategy* strategy);

// Where a directory's latest checkpoint is, as FindLatestCheckpoint found it.
struct FoundCheckpoint {
  std::string path;     // the directory's latest whole checkpoint; empty when there is none
  int64_t number = -1;  // its number (-1: none)
  // What was wrong, when the index could not be followed: "the index '.../checkpoint' names
  // ckpt-3, which is missing; using ckpt-2, the newest whole checkpoint". Empty when the index
  // named a whole checkpoint, or when the directory holds no checkpoint and no index (a new one).
  std::string warning;
};

// Reads `directory` as a CheckpointManager with this prefix writes it, without taking part in
// it (an evaluator that follows a job's checkpoints, a restore after training): the index's
// checkpoint when it is whole, else the newest whole <prefix>-<number>. Reads (and so verifies)
// the whole file it returns. Never throws for what it finds; the warning says it.
FoundCheckpoint FindLatestCheckpoint(const std::string& directory,
                                     const std::string& prefix = "ckpt");
// tf.train.latest_checkpoint: FindLatestCheckpoint's path (empty when there is none), its
// warning logged.
std::string LatestCheckpoint(const std::string& directory, const std::string& prefix = "ckpt");

struct CheckpointManagerOptions {
  std::string prefix = "ckpt";  // checkpoints are <prefix>-<number>
  // After each save, the checkpoints older than the newest max_to_keep are deleted; 0 keeps all.
  int max_to_keep = 0;
  // Use a directory whose owner record names another job: the record is replaced by this job's,
  // and the checkpoints already there become this job's (Latest() returns them, Save overwrites
  // them by number). For a job that changed on purpose (another seed, another cluster) and
  // resumes from its predecessor's checkpoints, or a directory to reuse.
  bool take_over = false;
  // How the user of a program sets take_over, for the refusal's message (a flag such as
  // "--checkpoint-dir-takeover"); empty: "CheckpointManagerOptions::take_over".
  std::string take_over_hint;
  // The directory's role in messages: "checkpoint directory", "backup directory".
  std::string what = "checkpoint directory";
};

class CheckpointManager {
 public:
  // Claims `directory` for `identity`: the writer creates it, takes its lock and checks or
  // writes its owner record. `strategy` is the strategy of the variables saved (nullptr: none, or
  // a process that alone writes, such as a parameter-server chief); with several workers this is
  // a collective. Throws Error: INVALID_ARGUMENT when the directory cannot be created or its
  // owner record names another job (both identities, and the override), UNAVAILABLE when another
  // process (or another manager in this one) holds its lock (that process's id and host).
  CheckpointManager(std::string directory, JobIdentity identity, Strategy* strategy = nullptr,
                    CheckpointManagerOptions options = {});
  // Releases the lock.
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Saves `checkpoint` as <prefix>-<number> (replacing a file of that name), then records it in
  // the index, then deletes what max_to_keep no longer keeps. Every worker takes part (reading
  // the values is a collective); the writer writes. Returns the file's path on every worker.
  // Throws Error naming the file and the reason; see the header comment for several workers.
  std::string Save(const Checkpoint& checkpoint, int64_t number);
  // The latest whole checkpoint (as FindLatestCheckpoint, the warning logged), as the writer
  // finds it, on every worker; its path is empty when there is none.
  FoundCheckpoint Latest() const;
  // Deletes every checkpoint, the index and the owner record (a fit that completed removes its
  // backup, and the directory is then free for any job). The lock is kept until destruction.
  void DeleteAll();

  const std::string& directory() const { return directory_; }
  const JobIdentity& identity() const { return identity_; }
  // Whether this process writes the files (the only worker, or the multi-worker writer).
  bool writer() const { return writer_; }

 private:
  class Lock;
  void Claim();
  std::string directory_;
  JobIdentity identity_;
  Strategy* strategy_;
  CheckpointManagerOptions options_;
  bool writer_ = true;
  std::unique_ptr<Lock> lock_;
};

}  // namespace chorus

#endif  // CHORUS_CHECKPOINT_MANAGER_H_
