// The raw gRPC streaming of chorus-ps-bench's baseline.
#include "raw_stream.h"

#include <chrono>

#include "ps_internal.h"

namespace chorus::ps_internal {

std::pair<double, double> RawStreamSeconds(const ParameterServerStrategy& strategy, int ps,
                                           int64_t bytes, int64_t chunk_bytes) {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  rpc::Task::Stub& stub = strategy.client().stub(ps);
  rpc::Chunk chunk;
  chunk.mutable_data()->assign(static_cast<size_t>(chunk_bytes), 'x');
  auto start = Clock::now();
  {
    grpc::ClientContext context;
    PrepareCall(context, strategy.client().timeout(), strategy.client().credential());
    rpc::Empty reply;
    auto writer = stub.StreamIn(&context, &reply);
    for (int64_t sent = 0; sent < bytes; sent += chunk_bytes) {
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    if (!status.ok()) ThrowRpcError(status, strategy.client().TaskName(ps), "a stream in");
  }
  const double in = seconds(start);
  start = Clock::now();
  {
    grpc::ClientContext context;
    PrepareCall(context, strategy.client().timeout(), strategy.client().credential());
    rpc::StreamOutRequest request;
    request.set_bytes(bytes);
    request.set_chunk_bytes(chunk_bytes);
    auto reader = stub.StreamOut(&context, request);
    int64_t received = 0;
    while (reader->Read(&chunk)) received += static_cast<int64_t>(chunk.data().size());
    const grpc::Status status = reader->Finish();
    if (!status.ok()) ThrowRpcError(status, strategy.client().TaskName(ps), "a stream out");
    if (received != bytes) {
      throw Error(CHORUS_INTERNAL, "a stream out brought " + std::to_string(received) +
                                       " bytes of " + std::to_string(bytes));
    }
  }
  return {in, seconds(start)};
}

}  // namespace chorus::ps_internal
