// The "tpu" cross-device ops: each operation on the "pjrt" enumerator's devices is one compiled
// StableHLO program with num_replicas = the replicas, run on all of them at once (the
// collective inside the program, as TPUs and XLA run them), cached by its text (operation,
// dtypes, sizes, replica order).
//
// A program's replica r runs on the ops' r-th device (the compile options' device assignment,
// left out where the devices are the client's first N in order), on whole allocations (a buffer
// that is an allocation from its first byte to its last). Where a buffer is part of an
// allocation (a slice, a packed batch), or an operation's inputs and outputs are not one per
// replica, the operation runs on the host instead: the buffers read, combined in the same
// order, and written back.
#ifndef CHORUS_PLUGINS_TPU_TPU_CROSS_DEVICE_OPS_H_
#define CHORUS_PLUGINS_TPU_TPU_CROSS_DEVICE_OPS_H_

#include <chorus/plugin.h>

namespace chorus::tpu {

const chorus_cross_device_ops_api* TpuCrossDeviceOpsTable();

}  // namespace chorus::tpu

#endif  // CHORUS_PLUGINS_TPU_TPU_CROSS_DEVICE_OPS_H_
