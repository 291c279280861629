#include "arguments.h"

#include <chorus/plugin_sdk.hpp>
#include <cstdint>

namespace chorus::gloo_plugin {
namespace {

using sdk::Fail;

void CheckStream(const chorus_stream* stream, const char* what) {
  if (stream != nullptr) {
    Fail(CHORUS_UNSUPPORTED, what, ": gloo works on host memory and takes no stream (pass NULL)");
  }
}

void CheckBuffer(const void* data, size_t bytes, const char* what, const char* name) {
  if (bytes > 0 && data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": ", name, " is NULL");
}

// count * size elements, refusing an overflow.
size_t Times(size_t count, int size, const char* what) {
  if (count > SIZE_MAX / static_cast<size_t>(size)) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": count ", count, " times ", size, " ranks overflows");
  }
  return count * static_cast<size_t>(size);
}

}  // namespace

size_t BytesOf(size_t count, chorus_dtype dtype, const char* what) {
  sdk::RequireDtype(dtype, what);
  const size_t element = chorus_dtype_size(dtype);
  if (count > SIZE_MAX / element) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": count ", count, " is too large for its dtype");
  }
  return count * element;
}

const chorus_all_reduce_args& CheckAllReduce(const chorus_all_reduce_args* args) {
  constexpr const char* kWhat = "gloo all_reduce";
  const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_reduce_args, stream), kWhat);
  const size_t bytes = BytesOf(a.count, a.dtype, kWhat);
  sdk::RequireReduceOp(a.op, kWhat);
  CheckStream(a.stream, kWhat);
  CheckBuffer(a.send, bytes, kWhat, "send");
  CheckBuffer(a.recv, bytes, kWhat, "recv");
  return a;
}

const chorus_collective_broadcast_args& CheckBroadcast(const chorus_collective_broadcast_args* args,
                                                       int size) {
  constexpr const char* kWhat = "gloo broadcast";
  const auto& a =
      sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_collective_broadcast_args, stream), kWhat);
  const size_t bytes = BytesOf(a.count, a.dtype, kWhat);
  if (a.root < 0 || a.root >= size) {
    Fail(CHORUS_INVALID_ARGUMENT, kWhat, ": root ", a.root, " is not a rank of 0..", size - 1);
  }
  CheckStream(a.stream, kWhat);
  CheckBuffer(a.data, bytes, kWhat, "data");
  return a;
}

const chorus_collective_all_gather_args& CheckAllGather(
    const chorus_collective_all_gather_args* args, int size) {
  constexpr const char* kWhat = "gloo all_gather";
  const auto& a =
      sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_collective_all_gather_args, stream), kWhat);
  const size_t bytes = BytesOf(a.count, a.dtype, kWhat);
  const size_t total = BytesOf(Times(a.count, size, kWhat), a.dtype, kWhat);
  CheckStream(a.stream, kWhat);
  CheckBuffer(a.send, bytes, kWhat, "send");
  CheckBuffer(a.recv, total, kWhat, "recv");
  return a;
}

const chorus_reduce_scatter_args& CheckReduceScatter(const chorus_reduce_scatter_args* args,
                                                     int size) {
  constexpr const char* kWhat = "gloo reduce_scatter";
  const auto& a =
      sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_scatter_args, stream), kWhat);
  const size_t bytes = BytesOf(a.recv_count, a.dtype, kWhat);
  const size_t total = BytesOf(Times(a.recv_count, size, kWhat), a.dtype, kWhat);
  sdk::RequireReduceOp(a.op, kWhat);
  CheckStream(a.stream, kWhat);
  CheckBuffer(a.send, total, kWhat, "send");
  CheckBuffer(a.recv, bytes, kWhat, "recv");
  return a;
}

}  // namespace chorus::gloo_plugin
