#include "distribute/packed_reduce.h"

#include <chorus/base/dtype.h>
#include <chorus/base/error.h>

namespace chorus::internal {

void CheckSameLayout(const std::vector<std::vector<Tensor>>& inputs) {
  for (size_t r = 1; r < inputs.size(); ++r) {
    if (inputs[r].size() != inputs[0].size()) {
      throw Error(CHORUS_INVALID_ARGUMENT, "all_reduce: replica " + std::to_string(r) + " passed " +
                                               std::to_string(inputs[r].size()) +
                                               " tensors, replica 0 passed " +
                                               std::to_string(inputs[0].size()));
    }
    for (size_t t = 0; t < inputs[0].size(); ++t) {
      const Tensor& a = inputs[0][t];
      const Tensor& b = inputs[r][t];
      if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
        throw Error(CHORUS_INVALID_ARGUMENT,
                    "all_reduce: tensor " + std::to_string(t) + " is " + DtypeName(b.dtype()) +
                        ShapeString(b.shape()) + " on replica " + std::to_string(r) + " but " +
                        DtypeName(a.dtype()) + ShapeString(a.shape()) + " on replica 0");
      }
    }
  }
}

std::vector<std::vector<size_t>> PlanPacks(const std::vector<Tensor>& tensors,
                                           int64_t bytes_per_pack) {
  std::vector<std::vector<size_t>> packs;
  std::vector<chorus_dtype> pack_dtype;
  std::vector<int64_t> pack_bytes;  // -1: a solo pack, closed to others
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t bytes = static_cast<int64_t>(tensors[t].bytes());
    const bool solo = bytes >= kSoloPackBytes;
    // The last open pack of this dtype takes the tensor if it fits.
    size_t chosen = packs.size();
    for (size_t p = packs.size(); !solo && p-- > 0;) {
      if (pack_dtype[p] != tensors[t].dtype() || pack_bytes[p] < 0) continue;
      if (bytes_per_pack == 0 || pack_bytes[p] + bytes <= bytes_per_pack) chosen = p;
      break;
    }
    if (chosen == packs.size()) {
      packs.emplace_back();
      pack_dtype.push_back(tensors[t].dtype());
      pack_bytes.push_back(0);
    }
    packs[chosen].push_back(t);
    pack_bytes[chosen] = solo ? -1 : pack_bytes[chosen] + bytes;
  }
  return packs;
}

ReplicaPacks PackTensors(const std::vector<Tensor>& tensors,
                         const std::vector<std::vector<size_t>>& packs, const Device& device) {
  ReplicaPacks out;
  out.inputs.reserve(packs.size());
  out.outputs.reserve(packs.size());
  for (const std::vector<size_t>& pack : packs) {
    int64_t elements = 0;
    for (size_t t : pack) elements += tensors[t].num_elements();
    // Every byte is written below, or by the reduce.
    Tensor flat = Tensor::Uninitialized(device, tensors[pack[0]].dtype(), {elements});
    if (pack.size() == 1) {
      const Tensor& tensor = tensors[pack[0]];
      const Tensor local = tensor.device() == device ? tensor : tensor.CopyTo(device);
      out.inputs.push_back(local.Reshaped({elements}));
      out.outputs.push_back(std::move(flat));
      continue;
    }
    size_t offset = 0;
    for (size_t t : pack) {
      const Tensor local = tensors[t].device() == device ? tensors[t] : tensors[t].CopyTo(device);
      device.enumerator->Copy(device.index, static_cast<char*>(flat.raw()) + offset, device.index,
                              local.raw(), local.bytes());
      offset += local.bytes();
    }
    out.inputs.push_back(flat);
    out.outputs.push_back(std::move(flat));
  }
  return out;
}

void ReducePacks(CrossDeviceOps& ops, chorus_reduce_op op,
                 const std::vector<const ReplicaPacks*>& replicas) {
  if (replicas.empty() || replicas[0]->outputs.empty()) return;
  std::vector<ReduceSpec> specs(replicas[0]->outputs.size());
  for (size_t p = 0; p < specs.size(); ++p) {
    specs[p].dtype = replicas[0]->outputs[p].dtype();
    specs[p].count = static_cast<size_t>(replicas[0]->outputs[p].num_elements());
    for (const ReplicaPacks* replica : replicas) {
      specs[p].inputs.push_back(replica->inputs[p].buffer());
      specs[p].outputs.push_back(replica->outputs[p].buffer());
    }
  }
  ops.BatchReduce(op, specs);  // one call for every pack
}

std::vector<Tensor> UnpackTensors(const std::vector<Tensor>& outputs,
                                  const std::vector<Tensor>& tensors,
                                  const std::vector<std::vector<size_t>>& packs) {
  std::vector<Tensor> results(tensors.size());
  for (size_t p = 0; p < packs.size(); ++p) {
    // Views into the reduced pack, which no one else holds: no copy.
    int64_t first = 0;
    for (size_t t : packs[p]) {
      results[t] = outputs[p].View(first, tensors[t].shape());
      first += tensors[t].num_elements();
    }
  }
  return results;
}

}  // namespace chorus::internal
