#include "ofi_endpoint.h"

#include <poll.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <shared_mutex>
#include <sstream>

#include "message_pieces.h"

using chorus::sdk::Fail;

namespace chorus::ofi {
namespace {

// How often the progress thread wakes without a completion to look at its peers.
constexpr int kWatchIntervalMs = 100;
// A peer that closed its endpoint may have sent messages still on their way: its receives fail
// only after this much more progress.
constexpr auto kClosedGrace = std::chrono::milliseconds(300);
constexpr size_t kCompletionBatch = 16;
// At most this many reads of the completion queue (kCompletionBatch each) when a peer is found
// lost, before its pending receives fail.
constexpr int kDrainReads = 1024;
// A wait on a larger message sleeps at once: two spinning ranks leave the kernel's loopback too
// little cpu (over tcp;ofi_rxm on 2 cpus: bandwidth 15-30% higher than sleeping up to 4 MiB, 5-15%
// lower from 8 MiB).
constexpr size_t kSpinMaxBytes = size_t{4} << 20;
// How long after a waiting caller last read the completion queue the progress thread still stands
// back.
constexpr auto kHandOver = sdk::CallerHandOver::kHandOver;

// libfabric 1.17's shm reaches a peer endpoint of the same process through that endpoint's own
// memory, which its fi_close frees: a send to it afterwards faulted inside fi_tsend (ranks as
// threads, as the conformance kit runs them; between processes the peer's region stays mapped).
// The shm endpoints of this process that are open, by address: a send to one of them posts under
// the shared lock after finding it here, and destroy takes it out under the exclusive lock before
// fi_close, so that such a send fails with PEER_LOST instead.
struct ShmEndpointsOfThisProcess {
  std::shared_mutex mutex;
  std::set<std::string> open;
};
ShmEndpointsOfThisProcess& ShmEndpointsHere() {
  static auto* endpoints = new ShmEndpointsOfThisProcess;  // never destroyed: used up to the exit
  return *endpoints;
}

void Check(int code, const char* call) {
  if (code != 0) Fail(CHORUS_INTERNAL, "ofi: ", call, " failed: ", FabricError(code));
}

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text;
  for (unsigned char c : bytes) {
    text += kDigits[c >> 4];
    text += kDigits[c & 15];
  }
  return text;
}

std::string Unhex(const std::string& text) {
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string bytes;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    bytes += static_cast<char>(digit(text[i]) * 16 + digit(text[i + 1]));
  }
  return bytes;
}

std::string FirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Processes whose pids this one can ask the kernel about: the same boot, the same pid namespace.
std::string LivenessDomain() {
  char namespace_link[256] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", namespace_link, sizeof namespace_link - 1);
  return FirstLine("/proc/sys/kernel/random/boot_id") + "/" +
         (n > 0 ? std::string(namespace_link, static_cast<size_t>(n)) : std::string("?"));
}

// Whether process `pid` of this liveness domain has exited (or is a zombie, not yet reaped).
bool ProcessExited(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = FirstLine(("/proc/" + std::to_string(pid) + "/stat").c_str());
  const size_t end_of_name = stat.rfind(')');
  return end_of_name != std::string::npos && end_of_name + 2 < stat.size() &&
         stat[end_of_name + 2] == 'Z';
}

// The host part of "host:port", "[v6]:port" or "host".
std::string HostOf(std::string_view address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    return std::string(
        address.substr(1, close == std::string_view::npos ? address.size() : close - 1));
  }
  const size_t colon = address.find(':');
  if (colon != std::string_view::npos && address.find(':', colon + 1) == std::string_view::npos) {
    return std::string(address.substr(0, colon));
  }
  return std::string(address);
}

bool IsConnectionError(int error) {
  switch (error) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_ESHUTDOWN:
    case EPIPE:
      return true;
    default:
      return false;
  }
}

int64_t MillisecondsLeft(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                               std::chrono::steady_clock::now())
      .count();
}

}  // namespace

EndpointOptions ParseOptions(const chorus_transport_create_args& args) {
  static const char* const kKnown[] = {"provider",         "address", "chunk_bytes", "eager_bytes",
                                       "directed_receive", "spin_us", "yield_us"};
  for (size_t i = 0; args.options != nullptr && i < args.num_options; ++i) {
    const char* key = args.options[i].key;
    if (key == nullptr ||
        std::none_of(std::begin(kKnown), std::end(kKnown),
                     [&](const char* known) { return std::strcmp(known, key) == 0; })) {
      Fail(CHORUS_INVALID_ARGUMENT, "ofi: unknown option '", key == nullptr ? "(null)" : key,
           "' (known: provider, address, chunk_bytes, eager_bytes, directed_receive, spin_us, "
           "yield_us)");
    }
  }
  EndpointOptions options;
  if (auto provider = sdk::FindOption(args.options, args.num_options, "provider")) {
    const bool valid =
        !provider->empty() && std::all_of(provider->begin(), provider->end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ';' || c == '-';
        });
    if (!valid) {
      Fail(CHORUS_INVALID_ARGUMENT, "ofi: option provider='", *provider,
           "' is not a libfabric provider name (letters, digits, '_' and '-', a layered one as "
           "core;utility, e.g. tcp;ofi_rxm or shm; fi_info -l lists them)");
    }
    options.provider = std::string(*provider);
  }
  if (auto address = sdk::FindOption(args.options, args.num_options, "address")) {
    if (address->empty()) Fail(CHORUS_INVALID_ARGUMENT, "ofi: option address is empty");
    options.bind_host = HostOf(*address);
  } else if (std::string_view given = sdk::CreateAddress(args); !given.empty()) {
    options.bind_host = HostOf(given);
  } else {
    options.bind_host = "127.0.0.1";  // no address known: reach only this host's ranks
  }
  options.chunk_bytes = sdk::IntegerOption(args.options, args.num_options, "chunk_bytes", 0);
  if (sdk::FindOption(args.options, args.num_options, "chunk_bytes") && options.chunk_bytes == 0) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "ofi: option chunk_bytes=0; give a positive number of bytes "
         "(or leave it out for the provider's max_msg_size)");
  }
  if (auto eager = sdk::FindOption(args.options, args.num_options, "eager_bytes");
      eager && *eager != "auto") {
    options.eager_bytes = sdk::IntegerOption(args.options, args.num_options, "eager_bytes", 0);
  }
  if (auto directed = sdk::FindOption(args.options, args.num_options, "directed_receive")) {
    if (*directed != "auto" && *directed != "off") {
      Fail(CHORUS_INVALID_ARGUMENT, "ofi: option directed_receive='", *directed,
           "' is neither auto (use FI_DIRECTED_RECV where the provider grants it) nor off (carry "
           "the source rank in the tag)");
    }
    options.directed_receive = *directed == "auto";
  }
  options.spin_us = static_cast<int64_t>(std::min<uint64_t>(
      sdk::IntegerOption(args.options, args.num_options, "spin_us", options.spin_us), 1000000));
  options.yield_us = static_cast<int64_t>(std::min<uint64_t>(
      sdk::IntegerOption(args.options, args.num_options, "yield_us", options.yield_us), 1000000));
  return options;
}

std::string PeerCard::Encode() const {
  std::ostringstream out;
  out << "pid=" << pid << "\nliveness=" << liveness_domain << "\nhost=" << host_id
      << "\nprovider=" << provider << "\npieces=" << pieces << "\naddress=" << Hex(address) << "\n";
  return out.str();
}

PeerCard PeerCard::Decode(const std::string& text, int rank) {
  PeerCard card;
  std::istringstream in(text);
  std::string line;
  bool has_address = false;
  while (std::getline(in, line)) {
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = line.substr(0, equals), value = line.substr(equals + 1);
    if (key == "pid") card.pid = static_cast<pid_t>(std::stol(value));
    if (key == "liveness") card.liveness_domain = value;
    if (key == "host") card.host_id = value;
    if (key == "provider") card.provider = value;
    if (key == "pieces") card.pieces = value;
    if (key == "address") {
      card.address = Unhex(value);
      has_address = true;
    }
  }
  if (!has_address || card.pid <= 0) {
    Fail(CHORUS_INTERNAL, "ofi: rank ", rank, " published a damaged address record");
  }
  return card;
}

}  // namespace chorus::ofi

using chorus::ofi::FabricError;
using Endpoint = chorus_transport_endpoint;

std::unique_ptr<Endpoint> Endpoint::Create(const chorus_transport_create_args& a) {
  const chorus::ofi::EndpointOptions options = chorus::ofi::ParseOptions(a);
  std::unique_ptr<Endpoint> endpoint(new Endpoint(a, options));
  endpoint->OpenFabric(options);
  endpoint->Rendezvous(std::string(chorus::sdk::CreateHostId(a)));
  endpoint->progress_ = std::thread([e = endpoint.get()] { e->ProgressLoop(); });
  return endpoint;
}

Endpoint::chorus_transport_endpoint(const chorus_transport_create_args& a,
                                    const chorus::ofi::EndpointOptions& options)
    : rank_(a.rank),
      size_(a.size),
      timeout_ms_(a.timeout_ms),
      store_(a.store),
      provider_(chorus::ofi::ChooseProvider(options.provider)),
      spin_us_(options.spin_us),
      yield_us_(options.yield_us) {}

void Endpoint::OpenFabric(const chorus::ofi::EndpointOptions& options) {
  info_ = chorus::ofi::FindProvider(provider_, options.bind_host, options.directed_receive);
  directed_ = options.directed_receive && chorus::ofi::GrantsDirectedReceive(*info_);
  tags_ =
      std::make_unique<chorus::ofi::TagLayout>(info_->ep_attr->mem_tag_format, size_, directed_);
  const size_t max_message = info_->ep_attr->max_msg_size;
  chunk_bytes_ =
      options.chunk_bytes == 0 ? max_message : std::min<size_t>(max_message, options.chunk_bytes);
  eager_bytes_ = options.eager_bytes ? static_cast<size_t>(*options.eager_bytes)
                                     : chorus::ofi::RxmEagerLimit(*info_);
  serialize_matching_ = std::string_view(info_->fabric_attr->prov_name) == "shm";
  wakeup_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeup_fd_ < 0) Fail(CHORUS_INTERNAL, "ofi: eventfd failed: ", std::strerror(errno));
  chorus::ofi::Check(chorus::ofi::Fabric().fabric(info_->fabric_attr, &fabric_, nullptr),
                     "fi_fabric");
  chorus::ofi::Check(fi_domain(fabric_, info_.get(), &domain_, nullptr), "fi_domain");
  fi_av_attr av_attr{};
  av_attr.type =
      info_->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE : info_->domain_attr->av_type;
  av_attr.count = static_cast<size_t>(size_);
  chorus::ofi::Check(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = 0;  // the provider's default depth
  cq_attr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(domain_, &cq_attr, &cq_, nullptr) == 0 &&
      fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) == 0) {
    // The progress thread sleeps in poll() on this descriptor.
  } else {  // a provider without wait descriptors: the progress thread looks every millisecond
    wait_fd_ = -1;
    if (cq_ != nullptr) fi_close(&cq_->fid);
    cq_ = nullptr;
    cq_attr.wait_obj = FI_WAIT_NONE;
    chorus::ofi::Check(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      chorus::sdk::Log(CHORUS_LOG_INFO, "ofi: provider " + provider_ +
                                            " has no completion wait descriptor; the progress "
                                            "thread looks every 1 ms");
    }
  }
  chorus::ofi::Check(fi_endpoint(domain_, info_.get(), &ep_, nullptr), "fi_endpoint");
  chorus::ofi::Check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
  chorus::ofi::Check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  chorus::ofi::Check(fi_enable(ep_), "fi_enable");
}

void Endpoint::Rendezvous(const std::string& host_id) {
  chorus::ofi::PeerCard mine;
  mine.pid = getpid();
  mine.liveness_domain = chorus::ofi::LivenessDomain();
  mine.host_id = host_id;
  mine.provider = info_->fabric_attr->prov_name;
  mine.pieces = std::to_string(chunk_bytes_) + "/" + std::to_string(eager_bytes_);
  std::string name(256, '\0');
  size_t length = name.size();
  int code = fi_getname(&ep_->fid, name.data(), &length);
  if (code == -FI_ETOOSMALL) {
    name.resize(length);
    code = fi_getname(&ep_->fid, name.data(), &length);
  }
  chorus::ofi::Check(code, "fi_getname");
  name.resize(length);
  mine.address = name;
  if (mine.provider == "shm") {
    std::unique_lock<std::shared_mutex> lock(chorus::ofi::ShmEndpointsHere().mutex);
    chorus::ofi::ShmEndpointsHere().open.insert(mine.address);
    registered_in_process_ = true;
  }
  store_.Set("ofi/" + std::to_string(rank_), mine.Encode());
  peers_.resize(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    Peer& peer = peers_[static_cast<size_t>(r)];
    peer.card =
        r == rank_
            ? mine
            : chorus::ofi::PeerCard::Decode(
                  store_.GetUnlessAborted("ofi/" + std::to_string(r), timeout_ms_, &aborted_), r);
    if (peer.card.provider != mine.provider) {
      Fail(CHORUS_INVALID_ARGUMENT, "ofi: rank ", r, " uses provider ", peer.card.provider,
           ", rank ", rank_, " uses ", mine.provider,
           "; give every rank the same option provider (or FI_PROVIDER)");
    }
    if (peer.card.pieces != mine.pieces) {
      Fail(CHORUS_INVALID_ARGUMENT, "ofi: rank ", r, " splits messages as chunk_bytes/eager_bytes ",
           peer.card.pieces.empty() ? "unknown (a build of the ofi plugin that does not say)"
                                    : peer.card.pieces,
           ", rank ", rank_, " as ", mine.pieces,
           " (a receive must be split as its send is); give every rank the same options "
           "chunk_bytes and eager_bytes, and the same FI_OFI_RXM_EAGER_LIMIT and "
           "FI_OFI_RXM_BUFFER_SIZE");
    }
    peer.in_this_process_shm = r != rank_ && mine.provider == "shm" && peer.card.pid == mine.pid &&
                               peer.card.liveness_domain == mine.liveness_domain;
    const int inserted = fi_av_insert(av_, peer.card.address.data(), 1, &peer.address, 0, nullptr);
    if (inserted != 1) {
      Fail(CHORUS_INTERNAL, "ofi: fi_av_insert of rank ", r,
           "'s address failed: ", FabricError(inserted < 0 ? inserted : -FI_EINVAL));
    }
  }
  // Ranks on this host: those of the same boot (the boot id heads the liveness domain), whatever
  // host id a test gives them, since they share these cpus.
  const auto boot = [](const std::string& domain) { return domain.substr(0, domain.find('/')); };
  const auto here = std::count_if(peers_.begin(), peers_.end(), [&](const Peer& peer) {
    return boot(peer.card.liveness_domain) == boot(mine.liveness_domain);
  });
  oversubscribed_ = chorus::sdk::MoreRanksThanCpus(here);
}

std::string Endpoint::PeerName(int peer) const {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  return "rank " + std::to_string(peer) + " (pid " + std::to_string(p.card.pid) +
         (p.card.host_id.empty() ? std::string() : " on " + p.card.host_id) + ")";
}

Endpoint::~chorus_transport_endpoint() {
  Close();
  stopping_ = true;
  if (progress_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      progress_idle_.notify_all();
    }
    WakeProgress();
    progress_.join();
  }
  if (registered_in_process_) {  // no send of this process reaches it from here on
    std::unique_lock<std::shared_mutex> lock(chorus::ofi::ShmEndpointsHere().mutex);
    chorus::ofi::ShmEndpointsHere().open.erase(peers_[static_cast<size_t>(rank_)].card.address);
  }
  // Closing the endpoint drops every operation the provider still holds.
  if (ep_ != nullptr) fi_close(&ep_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (av_ != nullptr) fi_close(&av_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  if (wakeup_fd_ >= 0) close(wakeup_fd_);
  std::lock_guard<std::mutex> lock(mutex_);
  for (chorus_request* request : requests_) {
    if (request->freed) {
      delete request;
      continue;
    }
    request->endpoint = nullptr;
    request->live_operations = 0;
    if (!request->done) {
      request->done = true;
      request->status = CHORUS_ABORTED;
      request->message = "ofi: the endpoint was destroyed before the operation completed";
    }
  }
  requests_.clear();
}

// "closed/<rank>" tells the peers that this endpoint receives and sends nothing more.
void Endpoint::Close() {
  if (closed_.exchange(true)) return;
  try {
    store_.Set("closed/" + std::to_string(rank_), "");
  } catch (...) {  // a broken store: the peers find out by the pid or their time-out instead
  }
}

chorus_request* Endpoint::Start(chorus_request::Kind kind, const chorus_p2p_args& a) {
  const bool send = kind == chorus_request::Kind::kSend;
  const char* what = send ? "ofi isend" : "ofi irecv";
  if (a.peer < 0 || a.peer >= size_) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": peer ", a.peer, " is not a rank of ", size_);
  }
  if (a.bytes > 0 && a.data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": data is NULL");
  if (aborted_) Fail(CHORUS_ABORTED, what, ": the endpoint was aborted");
  const int sender = send ? rank_ : a.peer;
  tags_->Encode(sender, a.tag);  // throws INVALID_ARGUMENT for a tag that does not fit
  bool from_lost_peer = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const Peer& peer = peers_[static_cast<size_t>(a.peer)];
    if (peer.lost && send) {
      Fail(CHORUS_PEER_LOST, what, ": ", PeerName(a.peer), " is lost: ", peer.lost_reason);
    }
    from_lost_peer = peer.lost;
  }
  // A send to an shm endpoint of this process: posted only while it is open (see
  // ShmEndpointsOfThisProcess).
  std::shared_lock<std::shared_mutex> peer_open;
  if (send && peers_[static_cast<size_t>(a.peer)].in_this_process_shm) {
    peer_open = std::shared_lock<std::shared_mutex>(chorus::ofi::ShmEndpointsHere().mutex);
    if (chorus::ofi::ShmEndpointsHere().open.count(
            peers_[static_cast<size_t>(a.peer)].card.address) == 0) {
      const std::string reason = "it destroyed its endpoint (in this process)";
      MarkPeerLost(a.peer, reason);
      Fail(CHORUS_PEER_LOST, what, ": ", PeerName(a.peer), " is lost: ", reason);
    }
  }
  auto request = std::make_unique<chorus_request>();
  request->kind = kind;
  request->endpoint = this;
  request->peer = a.peer;
  request->tag = a.tag;
  request->bytes = a.bytes;
  const size_t piece = chorus::ofi::PieceBytes(a.bytes, chunk_bytes_, eager_bytes_);
  const size_t chunks = a.bytes == 0 ? 1 : 1 + (a.bytes - 1) / piece;  // no overflow
  request->operations.resize(chunks);
  for (size_t i = 0; i < chunks; ++i) {
    chorus::ofi::Operation& op = request->operations[i];
    op.request = request.get();
    op.offset = i * piece;
    op.length = std::min(piece, a.bytes - op.offset);
    if (a.bytes == 0) op.length = 0;
  }
  chorus_request* started = request.release();
  char* data = static_cast<char*>(a.data);
  const uint64_t tag = tags_->Encode(sender, a.tag);
  const fi_addr_t address = peers_[static_cast<size_t>(a.peer)].address;
  std::lock_guard<std::mutex> order(post_mutex_);
  {  // registered before anything is posted: a completion may come at once
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.insert(started);
    started->live_operations = chunks;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  for (size_t i = 0; i < chunks; ++i) {
    chorus::ofi::Operation& op = started->operations[i];
    ssize_t code = 0;
    for (;;) {
      if (send) {
        code = fi_tsend(ep_, data + op.offset, op.length, nullptr, address, tag, &op.context);
      } else {
        const std::unique_lock<std::mutex> matching = MatchingLock();
        code = fi_trecv(ep_, data + op.offset, op.length, nullptr,
                        directed_ ? address : FI_ADDR_UNSPEC, tag, 0, &op.context);
      }
      if (code != -FI_EAGAIN || aborted_ || chorus::ofi::MillisecondsLeft(deadline) < 0) break;
      {
        // Failed meanwhile: the progress thread found its peer lost (a send to a peer that
        // closed its endpoint is refused with FI_EAGAIN for ever over tcp;ofi_rxm).
        std::lock_guard<std::mutex> lock(mutex_);
        if (started->done) break;
      }
      ReadCompletions(0);  // the provider's queue is full: progress frees it
    }
    if (code == 0) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    const chorus_status status = aborted_             ? CHORUS_ABORTED
                                 : code == -FI_EAGAIN ? CHORUS_TIMEOUT
                                                      : CHORUS_INTERNAL;
    FailLocked(*started, status,
               std::string(what) + " (" + PeerName(a.peer) + ", tag " + std::to_string(a.tag) +
                   ") could not be posted: " +
                   (aborted_ ? std::string("the endpoint was aborted")
                             : FabricError(static_cast<int>(code))));
    // Operations i.. were never posted: no completion will come for them. The last of these
    // calls may delete a request freed in the meantime, so `started` is not touched after.
    chorus_request* result = started;
    for (size_t j = i; j < chunks; ++j) FinishOperationLocked(*result);
    return result;
  }
  if (from_lost_peer) {
    // A message the peer sent before it was lost may wait in the provider's unexpected queue:
    // this receive matches it when posted, and its completion is read here. Anything else it
    // can no longer get.
    DrainCompletions();
    std::lock_guard<std::mutex> lock(mutex_);
    const Peer& peer = peers_[static_cast<size_t>(a.peer)];
    if (!started->done) {
      FailLocked(*started, CHORUS_PEER_LOST,
                 std::string(what) + ": " + PeerName(a.peer) + " is lost: " + peer.lost_reason);
    }
  }
  return started;
}

size_t Endpoint::ReadCompletions(int wait_ms) {
  fi_cq_tagged_entry entries[chorus::ofi::kCompletionBatch];
  ssize_t n = 0;
  {
    const std::unique_lock<std::mutex> matching = MatchingLock();
    n = fi_cq_read(cq_, entries, chorus::ofi::kCompletionBatch);
  }
  if (n == -FI_EAGAIN && wait_ms > 0) {
    WaitForCompletions(wait_ms);
    return 0;
  }
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) OnCompletion(entries[i]);
    return static_cast<size_t>(n);
  }
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry error{};
    if (fi_cq_readerr(cq_, &error, 0) == 1) {
      error.err = error.err < 0 ? -error.err : error.err;  // shm reports it negative
      OnError(error);
      return 1;
    }
    return 0;
  }
  if (n != -FI_EAGAIN && n != -FI_ETIMEDOUT && n != -FI_ECANCELED && n != -FI_EINTR) {
    chorus::sdk::Log(CHORUS_LOG_WARN, "ofi: reading the completion queue failed: " +
                                          FabricError(static_cast<int>(n)));
  }
  return 0;
}

// Sleeps until the CQ's file descriptor or the wake-up eventfd is readable, or wait_ms pass.
// fi_trywait first: the provider may have work that no descriptor would announce.
void Endpoint::WaitForCompletions(int wait_ms) {
  pollfd fds[2] = {{wakeup_fd_, POLLIN, 0}, {wait_fd_, POLLIN, 0}};
  nfds_t count = 1;
  int timeout = 1;  // without a wait object: look again after a millisecond
  if (wait_fd_ >= 0) {
    fid* cq = &cq_->fid;
    std::unique_lock<std::mutex> matching = MatchingLock();  // trywait progresses too
    if (fi_trywait(fabric_, &cq, 1) != FI_SUCCESS) return;   // completions to read: no sleep
    matching = {};
    count = 2;
    timeout = wait_ms;
  }
  if (poll(fds, count, timeout) > 0 && (fds[0].revents & POLLIN) != 0) {
    uint64_t value = 0;
    [[maybe_unused]] const ssize_t got = read(wakeup_fd_, &value, sizeof value);
  }
}

std::unique_lock<std::mutex> Endpoint::MatchingLock() {
  return serialize_matching_ ? std::unique_lock<std::mutex>(match_mutex_)
                             : std::unique_lock<std::mutex>();
}

void Endpoint::WakeProgress() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t put = write(wakeup_fd_, &one, sizeof one);
}

void Endpoint::OnCompletion(const fi_cq_tagged_entry& entry) {
  if (entry.op_context == nullptr) return;
  auto* op = static_cast<chorus::ofi::Operation*>(entry.op_context);
  const size_t length = entry.len;
  std::lock_guard<std::mutex> lock(mutex_);
  chorus_request& request = *op->request;
  const bool receive_completion = (entry.flags & FI_RECV) != 0;
  if (receive_completion != (request.kind == chorus_request::Kind::kReceive)) {
    // A completion of another kind than the operation it names: the provider completed an
    // operation twice, or one it no longer held. Say so loudly; the request is left as it is.
    chorus::sdk::Log(CHORUS_LOG_ERROR,
                     "ofi: provider " + provider_ + " reported a " +
                         (receive_completion ? "receive" : "send") + " completion for a " +
                         (receive_completion ? "send" : "receive") + " operation (flags 0x" +
                         std::to_string(entry.flags) + "); ignored");
    return;
  }
  if (request.kind == chorus_request::Kind::kReceive && length != op->length && !request.done) {
    FailLocked(request, CHORUS_INVALID_ARGUMENT,
               "ofi: " + PeerName(request.peer) + " sent " + std::to_string(op->offset + length) +
                   " bytes with tag " + std::to_string(request.tag) + ", but rank " +
                   std::to_string(rank_) + " receives exactly " + std::to_string(request.bytes) +
                   " (a receive must name the byte count the sender sends)");
  }
  FinishOperationLocked(request);
}

void Endpoint::OnError(const fi_cq_err_entry& error) {
  if (error.op_context == nullptr) {
    chorus::sdk::Log(CHORUS_LOG_WARN,
                     "ofi: a completion error without an operation: " + FabricError(error.err));
    return;
  }
  auto* op = static_cast<chorus::ofi::Operation*>(error.op_context);
  int lost_peer = -1;
  std::string lost_reason;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    chorus_request& request = *op->request;
    const std::string what =
        std::string(request.kind == chorus_request::Kind::kSend ? "a send to "
                                                                : "a receive from ") +
        PeerName(request.peer) + " with tag " + std::to_string(request.tag);
    if (error.err == FI_ECANCELED) {
      FailLocked(request, CHORUS_ABORTED,
                 "ofi: " + what + " was cancelled (the endpoint was aborted)");
    } else if (error.err == FI_ETRUNC) {
      FailLocked(request, CHORUS_INVALID_ARGUMENT,
                 "ofi: " + PeerName(request.peer) + " sent " +
                     std::to_string(op->offset + error.len + error.olen) + " bytes with tag " +
                     std::to_string(request.tag) + ", but rank " + std::to_string(rank_) +
                     " receives exactly " + std::to_string(request.bytes) +
                     " (a receive must name the byte count the sender sends)");
    } else if (chorus::ofi::IsConnectionError(error.err)) {
      lost_peer = request.peer;
      lost_reason = what + " failed: " + FabricError(error.err);
      FailLocked(request, CHORUS_PEER_LOST, "ofi: " + lost_reason);
    } else {
      char text[256] = {};
      const char* provider_text =
          fi_cq_strerror(cq_, error.prov_errno, error.err_data, text, sizeof text);
      FailLocked(request, CHORUS_INTERNAL,
                 "ofi: " + what + " failed: " + FabricError(error.err) + "; provider " + provider_ +
                     " says: " + (provider_text != nullptr ? provider_text : "(nothing)") +
                     " (prov_errno " + std::to_string(error.prov_errno) + ")");
    }
    FinishOperationLocked(request);
  }
  if (lost_peer >= 0) MarkPeerLost(lost_peer, lost_reason);
}

void Endpoint::FailLocked(chorus_request& request, chorus_status status,
                          const std::string& message) {
  if (!request.done) {
    request.done = true;
    request.status = status;
    request.message = message;
  }
  // The rest of a failed message must not match later messages: cancel what is still posted.
  if (request.live_operations > 0 && request.endpoint != nullptr) {
    for (chorus::ofi::Operation& op : request.operations) fi_cancel(&ep_->fid, &op.context);
  }
  changed_.notify_all();
}

void Endpoint::FinishOperationLocked(chorus_request& request) {
  if (request.live_operations > 0) --request.live_operations;
  if (request.live_operations > 0) return;
  if (request.freed) {
    requests_.erase(&request);
    delete &request;
    return;
  }
  request.done = true;  // status stays what a failure set, else OK
  changed_.notify_all();
}

void Endpoint::MarkPeerLost(int peer, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.lost) {
    p.lost = true;
    p.lost_reason = reason;
    chorus::sdk::Log(CHORUS_LOG_WARN, "ofi: rank " + std::to_string(rank_) + " lost " +
                                          PeerName(peer) + ": " + reason);
  }
  // Receives and sends alike (plugin.h transport rule T4): a send to a lost peer, a large one
  // waiting for the peer's side of a rendezvous above all, would never complete.
  for (chorus_request* request : requests_) {
    if (request->peer == peer && !request->done) {
      FailLocked(*request, CHORUS_PEER_LOST, "ofi: " + PeerName(peer) + " is lost: " + reason);
    }
  }
}

// libfabric's shm provider names a process's region in /dev/shm after its address (fi_getname:
// "fi_shm://PID:DOMAIN:ENDPOINT") and unlinks it when the process closes it or exits normally; a
// process killed with SIGKILL leaves it behind (16 MiB). A survivor that saw the process exit
// removes it.
void Endpoint::RemoveRegionOfDeadPeer(const std::string& address) {
  std::string name(address.c_str());  // fi_getname's bytes end in NULs
  constexpr std::string_view kScheme = "fi_shm://";
  if (name.rfind(kScheme, 0) == 0) name.erase(0, kScheme.size());
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") return;
  if (unlink(("/dev/shm/" + name).c_str()) == 0) {
    chorus::sdk::Log(CHORUS_LOG_INFO, "ofi: removed /dev/shm/" + name +
                                          ", the shared-memory region of a process that died");
  }
}

void Endpoint::WatchPeers() {
  std::set<int> watched;  // the peers pending receives wait on, and pending sends go to
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const chorus_request* request : requests_) {
      if (!request->done && !peers_[static_cast<size_t>(request->peer)].lost) {
        watched.insert(request->peer);
      }
    }
  }
  const chorus::ofi::PeerCard& mine = peers_[static_cast<size_t>(rank_)].card;
  for (int peer : watched) {
    Peer& p = peers_[static_cast<size_t>(peer)];  // closed_seen: the progress thread's alone
    std::string reason;
    if (p.card.liveness_domain == mine.liveness_domain && p.card.pid != mine.pid &&
        chorus::ofi::ProcessExited(p.card.pid)) {
      reason = "its process has exited";
      if (p.card.provider == "shm") RemoveRegionOfDeadPeer(p.card.address);
    } else {
      bool closed = false;
      try {
        closed = store_.Contains("closed/" + std::to_string(peer));
      } catch (const chorus::Error&) {  // the store is gone: the time-out ends the receive
      }
      if (closed) {
        const auto now = Clock::now();
        if (p.closed_seen == Clock::time_point{}) p.closed_seen = now;
        if (now - p.closed_seen >= chorus::ofi::kClosedGrace) {
          reason =
              "it closed its endpoint (destroy or abort) before sending what this rank waits for, "
              "or receiving what this rank sends it";
        }
      }
    }
    if (reason.empty()) continue;
    // What the peer sent before it closed or died may sit in this endpoint's queue: read it here
    // first, so that only receives it can no longer satisfy fail. Leaving that to the waiting
    // callers failed receives under load (a caller that reads the queue itself had not got a cpu
    // for the whole grace, and the progress thread stood back for it).
    DrainCompletions();
    MarkPeerLost(peer, reason);
  }
}

void Endpoint::DrainCompletions() {
  for (int reads = 0; reads < chorus::ofi::kDrainReads && ReadCompletions(0) > 0;) ++reads;
}

bool Endpoint::ProgressThreadStandsBack() const {
  return spinning_.load(std::memory_order_relaxed) > 0 || caller_read_.Recent();
}

void Endpoint::ProgressLoop() {
  auto next_watch = Clock::now();
  while (!stopping_) {
    if (ProgressThreadStandsBack()) {
      // A caller reads the queue: this thread reading it too would take the provider's lock and
      // a core from the caller (with 2 cpus, a ping-pong of 8 bytes took 45 instead of 9 us in
      // about a third of the runs).
      std::unique_lock<std::mutex> lock(mutex_);
      progress_idle_.wait_for(lock, chorus::ofi::kHandOver);
    } else {
      ReadCompletions(chorus::ofi::kWatchIntervalMs);
    }
    if (Clock::now() >= next_watch) {
      WatchPeers();
      next_watch = Clock::now() + std::chrono::milliseconds(chorus::ofi::kWatchIntervalMs);
    }
  }
}

void Endpoint::Abort() {
  if (aborted_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (chorus_request* request : requests_) {
      FailLocked(*request, CHORUS_ABORTED, "ofi: the endpoint was aborted");
    }
  }
  Close();  // so that the peers' receives from this rank fail too
  WakeProgress();
}

bool Endpoint::SpinOn(chorus_request& request, Clock::time_point deadline) {
  // With more ranks on this host than cpus a wait yields from the start: a rank that spins holds
  // the core the rank it waits for needs; one that sleeps answers a time slice late (4 ranks on 2
  // cpus, against sleeping at once, medians of six rounds: rhd@ofi and ring@ofi 1.5-2.4x faster
  // at 64 KiB-1 MiB).
  const auto spin = std::chrono::microseconds(oversubscribed_ ? 0 : spin_us_);
  const auto yield = std::chrono::microseconds(yield_us_);
  auto spin_until = Clock::now() + spin;
  bool yielding = oversubscribed_;
  // While any wait spins, the progress thread stands back, and for kHandOver after the last one
  // read the queue: a caller between two waits of a loop is about to read again.
  spinning_.fetch_add(1);
  for (uint32_t spins = 1;; ++spins) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (request.done) break;
    }
    if (yielding) sched_yield();
    // The domain is FI_THREAD_SAFE: another waiter may read the queue at the same time. A
    // provider with manual progress (ofi_rxm) moves its data in this call.
    const size_t handled = ReadCompletions(0);
    // While spinning, the clock every 16th empty read: it costs about as much as an empty read.
    if (handled == 0 && !yielding && spins % 16 != 0) continue;
    const auto now = Clock::now();
    if (handled > 0) {
      spin_until = now + spin;  // the queue moves: spin on
      yielding = oversubscribed_;
    } else if (now >= deadline || aborted_ || chorus::sdk::HostAbortRequested() ||
               now >= spin_until + yield) {
      break;
    } else {
      yielding = now >= spin_until;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const bool last = spinning_.fetch_sub(1) == 1;
  if (request.done) {
    caller_read_.Mark();
    return true;
  }
  // This wait sleeps now: the progress thread takes the queue at once (a peer's message may be
  // long in coming). It may also sleep in poll() since before this spin moved the provider's
  // state (work that no descriptor announces, which fi_trywait would have seen): it looks again.
  if (last) {
    caller_read_.Clear();
    progress_idle_.notify_all();
    WakeProgress();
  }
  return false;
}

chorus_status Endpoint::Wait(chorus_request& request, int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
  // A message arrives within microseconds: read it here rather than sleep until the progress
  // thread hands it over (over tcp;ofi_rxm on 2 cpus a ping-pong of 8 bytes took 45-55 us that
  // way, 7.5-9 us this way; fi_pingpong 6-8 us). Not above kSpinMaxBytes.
  if (spin_us_ > 0 && timeout_ms != 0 && request.bytes <= chorus::ofi::kSpinMaxBytes) {
    SpinOn(request, timeout_ms < 0 ? Clock::time_point::max() : deadline);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!request.done && caller_read_.Clear()) {
    // A wait that did not spin (a large message) sleeps now: the progress thread must not stand
    // back for the rest of kHandOver after an earlier wait's spin.
    progress_idle_.notify_all();
  }
  while (!request.done) {
    if (timeout_ms >= 0 && Clock::now() >= deadline) {
      return chorus::sdk::SetError(
          CHORUS_TIMEOUT,
          "ofi: the " +
              std::string(request.kind == chorus_request::Kind::kSend ? "send to "
                                                                      : "receive from ") +
              PeerName(request.peer) + " with tag " + std::to_string(request.tag) +
              " did not complete in " + std::to_string(timeout_ms) +
              " ms (the request is still live)");
    }
    if (chorus::sdk::HostAbortRequested()) {
      return chorus::sdk::SetError(CHORUS_ABORTED, "ofi: the wait was aborted by the host");
    }
    auto slice = Clock::now() + std::chrono::milliseconds(50);  // to look at the host's flag
    changed_.wait_until(lock, timeout_ms >= 0 ? std::min(slice, deadline) : slice);
  }
  // A failed request may still have operations the provider holds (a receive posted into the
  // caller's buffer): its caller frees that buffer once this returns, so wait for them first.
  if (request.status != CHORUS_OK) DrainLocked(request, lock);
  return request.status == CHORUS_OK ? CHORUS_OK
                                     : chorus::sdk::SetError(request.status, request.message);
}

bool Endpoint::DrainLocked(chorus_request& request, std::unique_lock<std::mutex>& lock) {
  if (request.live_operations == 0) return true;
  if (request.endpoint != nullptr) {
    for (chorus::ofi::Operation& op : request.operations) fi_cancel(&ep_->fid, &op.context);
  }
  WakeProgress();
  // The progress thread reads the cancellations' (or the operations') completions. One window
  // serves every drain of the endpoint: an operation stuck with a stopped peer is not cancelled
  // by waiting, and a failure frees many requests at once.
  if (!drain_until_) drain_until_ = Clock::now() + std::chrono::milliseconds(kDrainMs);
  return changed_.wait_until(lock, *drain_until_, [&] { return request.live_operations == 0; });
}

chorus_status Endpoint::Test(chorus_request& request, int* done) {
  std::lock_guard<std::mutex> lock(mutex_);
  *done = request.done ? 1 : 0;
  if (!request.done || request.status == CHORUS_OK) return CHORUS_OK;
  return chorus::sdk::SetError(request.status, request.message);
}

void Endpoint::Free(chorus_request* request) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Freed with operations still posted (its caller gave up on it after another failure): they
    // are cancelled and waited for, so that the provider writes nothing into a buffer the caller
    // frees next (ASan caught a late message landing in one).
    if (request->live_operations > 0 && !DrainLocked(*request, lock)) {
      request->freed = true;  // the provider still holds it: deleted at its last completion
      chorus::sdk::Log(CHORUS_LOG_WARN,
                       "ofi: a freed request still had operations with the provider after "
                       "cancelling them; its buffer may still be written until the endpoint is "
                       "destroyed");
      return;
    }
    requests_.erase(request);
  }
  delete request;
}
