// One hierarchical_copy context: argument checking and the four operations, all completed
// before they return.
#ifndef CHORUS_PLUGINS_HIERARCHICAL_CROSS_DEVICE_OPS_H_
#define CHORUS_PLUGINS_HIERARCHICAL_CROSS_DEVICE_OPS_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "device_api.h"
#include "hierarchical_all_reduce.h"
#include "scratch_buffer.h"

namespace chorus::hierarchical {

class HierarchicalCopy {
 public:
  // Throws chorus::sdk::Error on invalid arguments. Copies what it keeps.
  explicit HierarchicalCopy(const chorus_cross_device_ops_create_args& args);

  void Reduce(const chorus_reduce_args* args) const;
  void BatchReduce(const chorus_batch_reduce_args* args) const;
  void Broadcast(const chorus_broadcast_args* args) const;
  void AllGather(const chorus_all_gather_args* args) const;

 private:
  // A checked chorus_reduce_args.
  struct ReduceView {
    ReduceShape shape;
    std::span<const chorus_buffer> inputs;
    std::span<const chorus_buffer> outputs;
  };

  ReduceView CheckReduce(const chorus_reduce_args* args, size_t needed,
                         const std::string& what) const;
  std::span<const chorus_buffer> CheckBuffers(const chorus_buffer* buffers, size_t n,
                                              bool need_data, const std::string& what) const;
  void CheckDevice(uint32_t device, const std::string& what) const;
  void CheckStream(chorus_stream* stream, const char* what) const;

  // True when inputs are one buffer per replica device, in the context's order.
  bool IsPerDevice(std::span<const chorus_buffer> inputs) const;
  std::optional<size_t> PositionOf(uint32_t device) const;
  // Where a reduce that cannot go hierarchically is done: the first output's device, else the
  // first input's, skipping host memory (the enumerator may have no kernels for it).
  uint32_t TargetDevice(std::span<const chorus_buffer> outputs,
                        std::span<const chorus_buffer> inputs) const;

  void ReduceOne(const ReduceView& reduce, ScratchCache& scratch, size_t root_index,
                 chorus_stream* stream) const;
  // Concatenates, all-reduces in packs, splits. Returns the number of packs.
  size_t ReducePacked(std::span<const ReduceView> reduces, std::span<const size_t> group,
                      ScratchCache& scratch, size_t root_index, chorus_stream* stream) const;

  // Waits for the stream on every replica device and every output device, so that the
  // operation is complete when it returns.
  void Finish(chorus_stream* stream, std::span<const chorus_buffer> outputs) const;

  DeviceApi api_;
  uint32_t device_count_ = 0;
  std::vector<uint32_t> devices_;
  uint64_t num_packs_ = 1;
};

}  // namespace chorus::hierarchical

#endif  // CHORUS_PLUGINS_HIERARCHICAL_CROSS_DEVICE_OPS_H_
