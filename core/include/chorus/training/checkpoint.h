// Strategy-independent checkpoints: one copy per variable (an ON_READ variable saved as its
// aggregate), the optimizer's slots and step count. Saved under one strategy, restorable under
// another or none.
#ifndef CHORUS_CHECKPOINT_H_
#define CHORUS_CHECKPOINT_H_

#include <chorus/distribute/variable.h>
#include <chorus/training/optimizer.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace chorus {

class CheckpointManager;
class Strategy;

class Checkpoint {
 public:
  // Tracks a variable under `key` (unique within the checkpoint).
  Checkpoint& Track(const std::string& key, const Variable& variable);
  // Tracks an optimizer's slots and iteration count under "<key>/...". Slots created after this
  // call are tracked too (they are looked up at save and restore time).
  Checkpoint& Track(const std::string& key, Optimizer& optimizer);

  // Writes every tracked value to `path` (atomically: a temporary file of a name unique to this
  // writer, synced, then renamed over `path`). Called in cross-replica context or with no
  // strategy. Multi-worker: every worker must call it (reading SyncOnRead values and sharing the
  // outcome are collectives; a save on the writer alone waits for the others until the time-out),
  // the writer (should_checkpoint) writes, and every worker learns at once whether it could: the
  // writer throws its own error ("worker 0 could not save checkpoint '...': ..."), the others an
  // error that names the writer and its reason. chorus::CheckpointManager keeps numbered
  // checkpoints in a directory with an index.
  void Save(const std::string& path) const;
  // Reads `path` and assigns every tracked variable (every copy). Errors name the key: absent
  // from the file, or a different shape. Slots of an optimizer that has not created them yet are
  // created on restore.
  void Restore(const std::string& path) const;

 private:
  friend class CheckpointManager;
  // Reads every tracked value (with several workers a collective) into the file's bytes; sets
  // `strategy` to the strategy whose writer writes them (nullptr: none).
  std::vector<uint8_t> Encode(Strategy*& strategy) const;

  std::vector<std::pair<std::string, Variable>> variables_;
  std::vector<std::pair<std::string, Optimizer*>> optimizers_;
};

}  // namespace chorus

#endif  // CHORUS_CHECKPOINT_H_
