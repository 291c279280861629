#include "distribute/packed_reduce.h"

#include <chorus/base/dtype.h>
#include <chorus/base/error.h>

namespace chorus::internal {
namespace {

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

}  // namespace

std::vector<std::vector<size_t>> PlanPacks(const std::vector<Tensor>& tensors,
                                           int64_t bytes_per_pack) {
  std::vector<std::vector<size_t>> packs;
  std::vector<chorus_dtype> pack_dtype;
  std::vector<int64_t> pack_bytes;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t bytes = static_cast<int64_t>(tensors[t].bytes());
    // The last open pack of this dtype takes the tensor if it fits.
    size_t chosen = packs.size();
    for (size_t p = packs.size(); p-- > 0;) {
      if (pack_dtype[p] != tensors[t].dtype()) continue;
      if (bytes_per_pack == 0 || pack_bytes[p] + bytes <= bytes_per_pack) chosen = p;
      break;
    }
    if (chosen == packs.size()) {
      packs.emplace_back();
      pack_dtype.push_back(tensors[t].dtype());
      pack_bytes.push_back(0);
    }
    packs[chosen].push_back(t);
    pack_bytes[chosen] += bytes;
  }
  return packs;
}

std::vector<std::vector<Tensor>> PackedBatchReduce(CrossDeviceOps& ops, chorus_reduce_op op,
                                                   const std::vector<std::vector<Tensor>>& inputs,
                                                   const std::vector<Device>& devices,
                                                   int64_t bytes_per_pack) {
  CheckSameLayout(inputs);
  const size_t replicas = inputs.size();
  std::vector<std::vector<Tensor>> outputs(replicas);
  if (replicas == 0 || inputs[0].empty()) return outputs;
  const auto packs = PlanPacks(inputs[0], bytes_per_pack);

  // Per pack and replica: one flat tensor reduced in place, concatenating the pack's tensors.
  std::vector<std::vector<Tensor>> flats(packs.size());
  std::vector<ReduceSpec> specs(packs.size());
  for (size_t p = 0; p < packs.size(); ++p) {
    int64_t elements = 0;
    for (size_t t : packs[p]) elements += inputs[0][t].num_elements();
    const chorus_dtype dtype = inputs[0][packs[p][0]].dtype();
    specs[p].dtype = dtype;
    specs[p].count = static_cast<size_t>(elements);
    for (size_t r = 0; r < replicas; ++r) {
      Tensor flat(devices[r], dtype, {elements});
      size_t offset = 0;
      for (size_t t : packs[p]) {
        const Tensor& in = inputs[r][t];
        Tensor local = in.device() == devices[r] ? in : in.CopyTo(devices[r]);
        devices[r].enumerator->Copy(devices[r].index, static_cast<char*>(flat.raw()) + offset,
                                    devices[r].index, local.raw(), local.bytes());
        offset += local.bytes();
      }
      specs[p].inputs.push_back(flat.buffer());
      flats[p].push_back(std::move(flat));
    }
    specs[p].outputs = specs[p].inputs;
  }
  ops.BatchReduce(op, specs);  // one call for every pack

  for (size_t r = 0; r < replicas; ++r) {
    outputs[r].resize(inputs[r].size());
    for (size_t p = 0; p < packs.size(); ++p) {
      size_t offset = 0;
      for (size_t t : packs[p]) {
        Tensor out(devices[r], inputs[r][t].dtype(), inputs[r][t].shape());
        devices[r].enumerator->Copy(devices[r].index, out.raw(), devices[r].index,
                                    static_cast<char*>(flats[p][r].raw()) + offset, out.bytes());
        offset += out.bytes();
        outputs[r][t] = std::move(out);
      }
    }
  }
  return outputs;
}

}  // namespace chorus::internal
