// RingLink over gRPC: each rank runs a server that takes one client stream, from its left
// neighbour, and opens one client stream to its right neighbour's server. The only file of the
// plugin (besides the generated code) that includes gRPC headers.
#include <grpc/grpc.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/channel_arguments.h>
#include <ring_grpc.grpc.pb.h>

#include <algorithm>
#include <charconv>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "deadline.h"
#include "inbox.h"
#include "outbox.h"
#include "ring_link.h"

namespace chorus::ring_grpc {
namespace {

namespace wire = ::chorus::ring_grpc::wire;

// Call metadata that identifies the sender of a stream.
constexpr char kRankHeader[] = "chorus-ring-rank";
constexpr char kSizeHeader[] = "chorus-ring-size";
constexpr char kSegmentBytesHeader[] = "chorus-ring-segment-bytes";
// With a job secret: the left neighbour's proof over this rank's challenge (published in the
// job's store, which only members read) and the link, so only the job's ranks get a stream in.
constexpr char kProofHeader[] = "chorus-ring-proof";
constexpr char kProofRole[] = "chorus ring_grpc left neighbour";

// Bytes the outbox holds before Send waits: a few segments in flight per stream.
constexpr uint64_t kMinOutboxBytes = uint64_t{8} << 20;
constexpr int kOutboxSegments = 4;

// How long destroy waits for queued chunks to leave (a healthy neighbour takes them at once).
constexpr int64_t kDrainMs = 10000;
constexpr int64_t kDrainAfterFailureMs = 500;

constexpr std::chrono::milliseconds kPoll{100};

// Buffers kept for reuse: about 32 MiB of segments, 4 to 64 of them.
size_t PooledBuffers(uint64_t segment_bytes) {
  return static_cast<size_t>(std::clamp<uint64_t>((uint64_t{32} << 20) / segment_bytes, 4, 64));
}

std::string AddressKey(int rank) { return "ring_grpc/addr/" + std::to_string(rank); }
std::string SegmentBytesKey(int rank) { return "ring_grpc/segment_bytes/" + std::to_string(rank); }
std::string ChallengeKey(int rank) { return "ring_grpc/challenge/" + std::to_string(rank); }

// What a left neighbour's proof covers: the acceptor's challenge and who streams to whom.
std::string ProofMessage(const std::string& challenge, int64_t from, int64_t to, int64_t size) {
  return challenge + "|" + std::to_string(from) + ">" + std::to_string(to) + "/" +
         std::to_string(size);
}

// 32 random bytes as hex, fresh per communicator.
std::string NewChallenge() {
  std::random_device random;
  std::string text;
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) {
    const auto byte = static_cast<unsigned>(random()) & 0xff;
    text += kHex[byte >> 4];
    text += kHex[byte & 15];
  }
  return text;
}

// host:port, with brackets around an IPv6 host.
std::string HostPort(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<int64_t> ParseInteger(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// ---- The rendezvous store -------------------------------------------------------------------

void StoreSet(const chorus_kv_store& store, const std::string& key, const std::string& value) {
  const chorus_status status = store.set(store.ctx, key.c_str(), value.data(), value.size());
  if (status != CHORUS_OK) sdk::Fail(status, "could not publish '", key, "' in the store");
}

// The value of `key`, which rank `rank` publishes; waits until `deadline`, the set-up's
// (timeout_ms in all).
std::string StoreGet(const chorus_kv_store& store, const std::string& key, const Deadline& deadline,
                     int64_t timeout_ms, int rank) {
  std::string value(64, '\0');
  while (true) {
    size_t size = 0;
    const chorus_status status = store.get(store.ctx, key.c_str(), deadline.remaining_ms(),
                                           value.data(), value.size(), &size);
    if (status == CHORUS_TIMEOUT) {
      sdk::Fail(CHORUS_TIMEOUT, "timed out after ", timeout_ms, " ms waiting for rank ", rank,
                " to publish '", key, "' (did it create its communicator?)");
    }
    if (status != CHORUS_OK) sdk::Fail(status, "could not read '", key, "' from the store");
    if (size <= value.size()) {
      value.resize(size);
      return value;
    }
    value.resize(size);  // larger than the buffer: read again
  }
}

// ---- Conversions to and from the wire --------------------------------------------------------

chorus_status StatusFromWire(uint32_t status) {
  if (status == CHORUS_OK || status > CHORUS_UNAVAILABLE) return CHORUS_INTERNAL;
  return static_cast<chorus_status>(status);
}

// The chunk in `message`. Its bytes change places with a buffer from `pool`, which the message
// keeps for the next parse to fill.
Chunk FromWire(wire::Chunk& message, BufferPool& pool) {
  Chunk chunk;
  chunk.key = ChunkKey{message.op_sequence(), message.step(), message.segment()};
  chunk.signature = OpSignature{message.op(), message.dtype(), message.reduce_op(), message.root(),
                                message.total_bytes()};
  chunk.data = pool.Take();
  chunk.data.swap(*message.mutable_data());
  return chunk;
}

// Fills `message` from `item`. The chunk's bytes change places with the buffer the message sent
// last, which is left in item.chunk.data.
void ToWire(Outgoing& item, wire::Chunk* message) {
  message->Clear();  // keeps the data buffer's capacity
  if (item.failure) {
    wire::Failure* failure = message->mutable_failure();
    failure->set_status(static_cast<uint32_t>(item.failure->status));
    failure->set_rank(item.failure->rank);
    failure->set_message(item.failure->message);
    return;
  }
  const Chunk& chunk = item.chunk;
  message->set_op_sequence(chunk.key.op_sequence);
  message->set_step(chunk.key.step);
  message->set_segment(chunk.key.segment);
  message->set_op(chunk.signature.op);
  message->set_dtype(chunk.signature.dtype);
  message->set_reduce_op(chunk.signature.reduce_op);
  message->set_root(chunk.signature.root);
  message->set_total_bytes(chunk.signature.total_bytes);
  message->mutable_data()->swap(item.chunk.data);
}

std::string Describe(const grpc::Status& status) {
  std::string code;
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      code = "OK";
      break;
    case grpc::StatusCode::CANCELLED:
      code = "CANCELLED";
      break;
    case grpc::StatusCode::UNAVAILABLE:
      code = "UNAVAILABLE";
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      code = "INVALID_ARGUMENT";
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      code = "DEADLINE_EXCEEDED";
      break;
    case grpc::StatusCode::INTERNAL:
      code = "INTERNAL";
      break;
    default:
      code = "code " + std::to_string(static_cast<int>(status.error_code()));
      break;
  }
  return status.error_message().empty() ? code : code + ": " + status.error_message();
}

// ---- The link ---------------------------------------------------------------------------------

class GrpcRingLink;

// The server side: takes the one stream from the left neighbour and fills the inbox.
class RingService final : public wire::Ring::Service {
 public:
  explicit RingService(GrpcRingLink& link) : link_(link) {}
  grpc::Status Exchange(grpc::ServerContext* context, grpc::ServerReader<wire::Chunk>* reader,
                        wire::Ack* ack) override;

 private:
  GrpcRingLink& link_;
};

class GrpcRingLink final : public RingLink {
 public:
  explicit GrpcRingLink(const GrpcRingConfig& config)
      : RingLink(config.rank, config.size),
        config_(config),
        buffers_(PooledBuffers(config.segment_bytes), 2 * config.segment_bytes),
        inbox_(left()),
        outbox_(right(), static_cast<size_t>(std::max<uint64_t>(
                             kMinOutboxBytes, kOutboxSegments * config.segment_bytes))),
        service_(*this) {}

  ~GrpcRingLink() override { Stop(); }

  BufferPool& buffers() override { return buffers_; }

  // The set-up; separate from the constructor so that a failure still runs the destructor.
  void Connect() {
    const Deadline deadline = Deadline::After(config_.timeout_ms);
    if (sdk::JobSecretPresent()) {
      challenge_ = NewChallenge();
      StoreSet(*config_.store, ChallengeKey(rank()), challenge_);
    }
    StartServer();
    StoreSet(*config_.store, SegmentBytesKey(rank()), std::to_string(config_.segment_bytes));
    StoreSet(*config_.store, AddressKey(rank()), address_);
    CheckRightSegmentBytes(deadline);
    right_address_ =
        StoreGet(*config_.store, AddressKey(right()), deadline, config_.timeout_ms, right());
    OpenStreamToRight(deadline);
    WaitForLeft(deadline);
    if (sdk::LogEnabled(CHORUS_LOG_DEBUG)) {
      sdk::Log(CHORUS_LOG_DEBUG, "ring_grpc rank " + std::to_string(rank()) + " of " +
                                     std::to_string(size()) + " listens on " + address_ +
                                     ", streams to rank " + std::to_string(right()) + " at " +
                                     right_address_);
    }
  }

  void Send(Chunk chunk, int64_t timeout_ms) override {
    outbox_.Push(std::move(chunk), timeout_ms);
  }

  Chunk Receive(const ChunkKey& key, int64_t timeout_ms) override {
    return inbox_.Take(key, timeout_ms);
  }

  void PassFailure(RingFailure failure) override {
    {
      std::lock_guard lock(mutex_);
      failed_ = true;
    }
    outbox_.PushFailure(std::move(failure));  // dropped when one went before
  }

  void Abort() override {
    inbox_.Abort();
    outbox_.Abort();
    PassFailure(RingFailure{CHORUS_ABORTED, rank(),
                            "rank " + std::to_string(rank()) + " was aborted (abort() called)"});
  }

  // ---- Called by RingService on the server's thread --------------------------------------------

  // Checks who opened the stream; an empty string when it is the left neighbour.
  std::string AcceptLeft(const grpc::ServerContext& context) {
    const auto& metadata = context.client_metadata();
    auto header = [&](const char* name) -> std::optional<int64_t> {
      const auto found = metadata.find(name);
      if (found == metadata.end()) return std::nullopt;
      return ParseInteger(std::string_view(found->second.data(), found->second.size()));
    };
    const auto rank_header = header(kRankHeader);
    const auto size_header = header(kSizeHeader);
    const auto segment_header = header(kSegmentBytesHeader);
    if (!challenge_.empty()) {
      // A stream without the proof is no member's: refused without failing the job (a port
      // scanner, another job); a member's mistakes are checked below.
      const auto proof = metadata.find(kProofHeader);
      const std::optional<std::string> expected =
          rank_header && size_header
              ? sdk::ProveJobSecret(kProofRole,
                                    ProofMessage(challenge_, *rank_header, rank(), *size_header))
              : std::nullopt;
      if (proof == metadata.end() || !expected ||
          !sdk::ConstantTimeEquals(std::string_view(proof->second.data(), proof->second.size()),
                                   *expected)) {
        sdk::Log(CHORUS_LOG_WARN, "ring_grpc rank " + std::to_string(rank()) +
                                      " refused a stream from " + context.peer() +
                                      ": it does not prove the job's secret");
        return "the stream does not prove the job's secret";
      }
    }
    std::string refusal;
    if (!rank_header || !size_header || !segment_header) {
      refusal = "a stream from " + context.peer() + " lacks the chorus-ring-* headers";
    } else if (*size_header != size() || *rank_header != left()) {
      refusal = "rank " + std::to_string(*rank_header) + " of " + std::to_string(*size_header) +
                " connected, where rank " + std::to_string(left()) + " of " +
                std::to_string(size()) + " was expected (ranks disagree on the size)";
    } else if (static_cast<uint64_t>(*segment_header) != config_.segment_bytes) {
      refusal = "rank " + std::to_string(left()) +
                " uses segment_bytes=" + std::to_string(*segment_header) + " but rank " +
                std::to_string(rank()) + " uses " + std::to_string(config_.segment_bytes) +
                "; every rank must pass the same";
    }
    {
      std::lock_guard lock(mutex_);
      if (refusal.empty() && left_connected_) {
        return "a second stream from rank " + std::to_string(left()) + " was refused";
      }
      if (refusal.empty()) {
        left_connected_ = true;
      } else if (!left_refusal_) {
        left_refusal_ = refusal;
      }
    }
    left_changed_.notify_all();
    return refusal;
  }

  void Deliver(wire::Chunk& message) {
    if (message.has_failure()) {
      const wire::Failure& failure = message.failure();
      RingFailure passed{StatusFromWire(failure.status()), failure.rank(), failure.message()};
      inbox_.Close(passed.status,
                   "rank " + std::to_string(passed.rank) + " failed: " + passed.message);
      PassFailure(std::move(passed));  // on around the ring
      return;
    }
    inbox_.Deliver(FromWire(message, buffers_));
  }

  void FailInbox(chorus_status status, const std::string& message) noexcept {
    try {
      inbox_.Close(status, message);
    } catch (const std::exception&) {
      inbox_.Abort();  // cannot even keep the message (out of memory): fail with ABORTED
    }
  }

  void LeftStreamEnded(bool cancelled) {
    const std::string who = "rank " + std::to_string(left()) + " (left neighbour)";
    inbox_.Close(CHORUS_PEER_LOST,
                 cancelled ? "the stream from " + who +
                                 " broke (its process ended, or it cancelled the stream)"
                           : who + " closed its stream (it destroyed its communicator)");
  }

 private:
  void StartServer() {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(HostPort(config_.host, 0), grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    builder.SetMaxReceiveMessageSize(INT_MAX);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // Accept the keep-alive pings of the neighbour's channel (below).
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port == 0) {
      sdk::Fail(CHORUS_UNAVAILABLE, "could not listen on ", HostPort(config_.host, 0),
                "; set the option host to an address of this machine");
    }
    address_ = HostPort(config_.host, port);
  }

  void CheckRightSegmentBytes(const Deadline& deadline) {
    const std::string value =
        StoreGet(*config_.store, SegmentBytesKey(right()), deadline, config_.timeout_ms, right());
    const auto theirs = ParseInteger(value);
    if (!theirs || static_cast<uint64_t>(*theirs) != config_.segment_bytes) {
      sdk::Fail(CHORUS_INVALID_ARGUMENT, "rank ", right(), " uses segment_bytes=", value,
                " but rank ", rank(), " uses ", config_.segment_bytes,
                "; every rank must pass the same");
    }
  }

  void OpenStreamToRight(const Deadline& deadline) {
    // The right neighbour's challenge, when the job has a secret (published before its address).
    const std::string right_challenge =
        sdk::JobSecretPresent()
            ? StoreGet(*config_.store, ChallengeKey(right()), deadline, config_.timeout_ms, right())
            : std::string();
    grpc::ChannelArguments arguments;
    arguments.SetMaxSendMessageSize(-1);
    arguments.SetMaxReceiveMessageSize(-1);
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    arguments.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);          // never through http_proxy
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);      // notice a vanished machine
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
    arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    channel_ =
        grpc::CreateCustomChannel(right_address_, grpc::InsecureChannelCredentials(), arguments);
    while (!channel_->WaitForConnected(std::chrono::system_clock::now() + kPoll)) {
      if (sdk::HostAbortRequested()) sdk::Fail(CHORUS_ABORTED, "the core requested an abort");
      if (deadline.expired()) {
        sdk::Fail(CHORUS_TIMEOUT, "timed out after ", config_.timeout_ms, " ms connecting to rank ",
                  right(), " (right neighbour) at ", right_address_);
      }
    }
    context_.AddMetadata(kRankHeader, std::to_string(rank()));
    context_.AddMetadata(kSizeHeader, std::to_string(size()));
    context_.AddMetadata(kSegmentBytesHeader, std::to_string(config_.segment_bytes));
    if (!right_challenge.empty()) {
      const std::optional<std::string> proof =
          sdk::ProveJobSecret(kProofRole, ProofMessage(right_challenge, rank(), right(), size()));
      if (!proof) {
        sdk::Fail(CHORUS_INTERNAL, "the core could not prove the job's secret for the stream to ",
                  "rank ", right());
      }
      context_.AddMetadata(kProofHeader, *proof);
    }
    stub_ = wire::Ring::NewStub(channel_);
    writer_ = stub_->Exchange(&context_, &ack_);
    writer_thread_ = std::thread([this] { WriteLoop(); });
  }

  void WaitForLeft(const Deadline& deadline) {
    std::unique_lock lock(mutex_);
    while (!left_connected_) {
      if (left_refusal_) sdk::Fail(CHORUS_INVALID_ARGUMENT, *left_refusal_);
      if (sdk::HostAbortRequested()) sdk::Fail(CHORUS_ABORTED, "the core requested an abort");
      if (deadline.expired()) {
        sdk::Fail(CHORUS_TIMEOUT, "timed out after ", config_.timeout_ms, " ms waiting for rank ",
                  left(), " (left neighbour) to connect to ", address_);
      }
      left_changed_.wait_until(lock, deadline.NextWake(kPoll));
    }
  }

  // The writer thread: sends the outbox in order, then closes the stream.
  // The writer thread's body. Nothing may escape a thread (std::terminate): a failure here (an
  // allocation while converting a chunk) breaks the outbox instead, so senders fail with it.
  void WriteLoop() {
    try {
      wire::Chunk message;
      bool broke = false;
      while (std::optional<Outgoing> item = outbox_.Pop()) {
        ToWire(*item, &message);
        buffers_.Give(std::move(item->chunk.data));  // the buffer sent before
        if (!writer_->Write(message)) {
          broke = true;
          break;
        }
      }
      if (!broke) writer_->WritesDone();
      const grpc::Status status = writer_->Finish();
      if (broke || !status.ok()) {
        outbox_.Broken("the stream to rank " + std::to_string(right()) + " (right neighbour) at " +
                       right_address_ + " broke: gRPC status " + Describe(status));
      }
    } catch (const std::exception& e) {
      context_.TryCancel();
      try {
        outbox_.Broken(std::string("the writer to rank ") + std::to_string(right()) +
                       " (right neighbour) failed: " + e.what());
      } catch (const std::exception&) {
        outbox_.Abort();  // cannot even keep the message (out of memory): fail with ABORTED
      }
    }
    {
      std::lock_guard lock(mutex_);
      writer_done_ = true;
    }
    writer_changed_.notify_all();
  }

  // Lets queued chunks leave, closes the stream to the right, then the server (which cancels
  // the left neighbour's stream).
  void Stop() {
    outbox_.Close();
    if (writer_thread_.joinable()) {
      bool failed;
      {
        std::lock_guard lock(mutex_);
        failed = failed_;
      }
      const Deadline drain = Deadline::After(failed ? kDrainAfterFailureMs : kDrainMs);
      std::unique_lock lock(mutex_);
      while (!writer_done_ && !drain.expired()) {
        writer_changed_.wait_until(lock, drain.NextWake(kPoll));
      }
      if (!writer_done_) context_.TryCancel();  // the right neighbour does not read
      lock.unlock();
      writer_thread_.join();
    }
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  }

  const GrpcRingConfig config_;
  BufferPool buffers_;
  Inbox inbox_;
  Outbox outbox_;
  std::string challenge_;  // with a job secret: what the left neighbour proves over
  RingService service_;    // declared before server_, so it outlives it

  std::mutex mutex_;
  std::condition_variable left_changed_;
  std::condition_variable writer_changed_;
  bool left_connected_ = false;
  std::optional<std::string> left_refusal_;
  bool writer_done_ = false;
  bool failed_ = false;

  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::string right_address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<wire::Ring::Stub> stub_;
  grpc::ClientContext context_;
  wire::Ack ack_;
  std::unique_ptr<grpc::ClientWriter<wire::Chunk>> writer_;
  std::thread writer_thread_;
};

// Runs on a gRPC server thread, which nothing may escape: a failure while taking a chunk in (an
// allocation) closes the inbox with it, so the receiving operation fails naming it.
grpc::Status RingService::Exchange(grpc::ServerContext* context,
                                   grpc::ServerReader<wire::Chunk>* reader, wire::Ack*) {
  try {
    const std::string refusal = link_.AcceptLeft(*context);
    if (!refusal.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, refusal);
    wire::Chunk message;
    while (reader->Read(&message)) link_.Deliver(message);
    link_.LeftStreamEnded(context->IsCancelled());
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    const std::string message =
        std::string("taking in a chunk from the left neighbour failed: ") + e.what();
    link_.FailInbox(CHORUS_INTERNAL, message);
    return grpc::Status(grpc::StatusCode::INTERNAL, message);
  }
}

}  // namespace

std::unique_ptr<RingLink> ConnectGrpcRing(const GrpcRingConfig& config) {
  if (config.size < 2 || config.rank < 0 || config.rank >= config.size) {
    sdk::Fail(CHORUS_INTERNAL, "ConnectGrpcRing: rank ", config.rank, " of ", config.size);
  }
  auto link = std::make_unique<GrpcRingLink>(config);
  link->Connect();  // on failure, ~GrpcRingLink shuts down what was started
  return link;
}

}  // namespace chorus::ring_grpc
