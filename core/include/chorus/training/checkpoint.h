// Strategy-independent checkpoints: one copy per variable (an ON_READ variable saved as its
// aggregate), the optimizer's slots and step count. Saved under one strategy, restorable under
// another or none.
#ifndef CHORUS_CHECKPOINT_H_
#define CHORUS_CHECKPOINT_H_

#include <chorus/distribute/variable.h>
#include <chorus/training/optimizer.h>

#include <string>
#include <utility>
#include <vector>

namespace chorus {

class Checkpoint {
 public:
  // Tracks a variable under `key` (unique within the checkpoint).
  Checkpoint& Track(const std::string& key, const Variable& variable);
  // Tracks an optimizer's slots and iteration count under "<key>/...". Slots created after this
  // call are tracked too (they are looked up at save and restore time).
  Checkpoint& Track(const std::string& key, Optimizer& optimizer);

  // Writes every tracked value to `path` (atomically: a temporary file, then a rename). Called in
  // cross-replica context or with no strategy.
  void Save(const std::string& path) const;
  // Reads `path` and assigns every tracked variable (every copy). Errors name the key: absent
  // from the file, or a different shape. Slots of an optimizer that has not created them yet are
  // created on restore.
  void Restore(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, Variable>> variables_;
  std::vector<std::pair<std::string, Optimizer*>> optimizers_;
};

}  // namespace chorus

#endif  // CHORUS_CHECKPOINT_H_
