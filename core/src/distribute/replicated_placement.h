// Where a replicated strategy (Mirrored, MultiWorkerMirrored, TPU) puts a variable.
#ifndef CHORUS_CORE_DISTRIBUTE_REPLICATED_PLACEMENT_H_
#define CHORUS_CORE_DISTRIBUTE_REPLICATED_PLACEMENT_H_

#include <chorus/distribute/strategy.h>

namespace chorus::internal {

// A copy on every replica's device: SyncOnRead for ON_READ variables, else Mirrored.
inline VariableKind ReplicatedPlacement(VariableSynchronization synchronization) {
  return synchronization == VariableSynchronization::kOnRead ? VariableKind::kSyncOnRead
                                                             : VariableKind::kMirrored;
}

}  // namespace chorus::internal

#endif  // CHORUS_CORE_DISTRIBUTE_REPLICATED_PLACEMENT_H_
