// One fake plugin, built as many variants (Vulkan-Loader style). Each FAKE_* macro set by
// tests/loader/CMakeLists.txt turns it into one kind of broken or unusual plugin. It compiles
// against the 1.1 header and against the frozen 1.0 one (tests/abi/v1_0), which is how the
// loader tests prove that a plugin built for 1.0 keeps loading.
#include <chorus/plugin.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef FAKE_NAME
#error "FAKE_NAME must be defined"
#endif
#ifndef FAKE_COLLECTIVE_SCORED
#define FAKE_COLLECTIVE_SCORED false
#endif
#ifndef FAKE_ABI_MAJOR
#define FAKE_ABI_MAJOR CHORUS_ABI_MAJOR
#endif
#ifndef FAKE_ABI_MINOR
#define FAKE_ABI_MINOR CHORUS_ABI_MINOR
#endif

namespace {

#ifdef FAKE_CONSTRUCTOR_SETS_SIGNALS
// What libfabric's psm provider (libinfinipath) does when it is loaded: handlers of its own for
// SIGINT and SIGTERM that call exit(), from a library constructor. The core must put the
// previous handling back, or a scheduler's SIGTERM runs static destructors under live threads.
[[noreturn]] void ExitOnSignal(int) { std::exit(1); }
const bool kSignalsTaken = [] {
  std::signal(SIGTERM, ExitOnSignal);
  std::signal(SIGINT, ExitOnSignal);
  return true;
}();
#endif

// plugin.h: last_error is per thread.
thread_local const char* g_error = "";
const chorus_host* g_host = nullptr;

#ifdef FAKE_THREAD_AT_EXIT
// A thread of the plugin's that its shutdown does not stop (as a library's own worker thread may
// not be): it runs this code until the process ends, without a pause, so that it faults at once
// if the code is unmapped under it.
std::atomic<uint64_t> g_turns{0};
[[noreturn]] void RunForever() {
  for (;;) g_turns.fetch_add(1, std::memory_order_relaxed);
}
#endif

chorus_status Init(const chorus_host* host) {
  g_host = host;
#ifdef FAKE_THREAD_AT_EXIT
  std::thread(RunForever).detach();
#endif
#ifdef FAKE_INIT_FAILS
  g_error = "no fake device on this machine";
  return CHORUS_UNAVAILABLE;
#else
  return CHORUS_OK;
#endif
}
void Shutdown() { g_host = nullptr; }
const char* LastError() { return g_error; }
chorus_status RequestTest(chorus_request*, int* done) {
  *done = 1;
  return CHORUS_OK;
}
chorus_status RequestWait(chorus_request*, int64_t) { return CHORUS_OK; }
void RequestFree(chorus_request*) {}

// A cross-device ops whose every operation succeeds without touching memory: the loader tests
// only need something to create and hold.
chorus_status OpsCreate(const chorus_cross_device_ops_create_args*, chorus_cross_device_ops** out) {
  static int token;
  *out = reinterpret_cast<chorus_cross_device_ops*>(&token);
  return CHORUS_OK;
}
void OpsDestroy(chorus_cross_device_ops*) {}
// Waits up to `timeout_ms` for the host's abort flag (FAKE_BLOCKING): ABORTED when it rises.
chorus_status BlockUntilAborted(int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (g_host != nullptr && g_host->abort_requested(g_host->ctx)) {
      g_error = FAKE_NAME ": the host's abort flag ended the wait";
      return CHORUS_ABORTED;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  g_error = FAKE_NAME ": timed out";
  return CHORUS_TIMEOUT;
}

chorus_status OpsReduce(chorus_cross_device_ops*, const chorus_reduce_args*,
                        chorus_request** request) {
  *request = nullptr;
#ifdef FAKE_BLOCKING
  return BlockUntilAborted(60000);
#else
  return CHORUS_OK;
#endif
}

const chorus_cross_device_ops_api kOps = [] {
  chorus_cross_device_ops_api t{};
  t.struct_size = sizeof(t);
  t.name = FAKE_NAME "_ops";
  t.create = OpsCreate;
  t.destroy = OpsDestroy;
  t.reduce = OpsReduce;
  return t;
}();

// A collective that copies its input (right for one rank) or, in FAKE_BLOCKING, blocks every
// all_reduce until the host's abort flag is raised or its time-out passes: a plugin whose only
// way out of a wait is abort_requested (it has no abort()).
struct Comm {
  int64_t timeout_ms = 0;
};
chorus_status CommCreate(const chorus_communicator_create_args* args, chorus_communicator** out) {
  *out = reinterpret_cast<chorus_communicator*>(new Comm{args->timeout_ms});
  return CHORUS_OK;
}
void CommDestroy(chorus_communicator* comm) { delete reinterpret_cast<Comm*>(comm); }
chorus_status CommAllReduce(chorus_communicator* comm, const chorus_all_reduce_args* args,
                            chorus_request** request) {
  *request = nullptr;
#if defined(FAKE_ALL_REDUCE_THROWS)
  (void)comm;
  (void)args;
  throw std::runtime_error("boom");
#elif defined(FAKE_ALL_REDUCE_SLEEPS_MS)
  // Ignores its time-out and the host's abort: returns when it pleases (FAKE_ALL_REDUCE_SLEEPS_MS
  // later), which may be never.
  (void)comm;
  (void)args;
  std::this_thread::sleep_for(std::chrono::milliseconds(FAKE_ALL_REDUCE_SLEEPS_MS));
  return CHORUS_OK;
#elif defined(FAKE_BLOCKING)
  (void)args;
  return BlockUntilAborted(reinterpret_cast<Comm*>(comm)->timeout_ms);
#else
  (void)comm;
  if (args->count > 0 && args->send != args->recv) {
    std::memcpy(args->recv, args->send, args->count * chorus_dtype_size(args->dtype));
  }
  return CHORUS_OK;
#endif
}

#if CHORUS_ABI_MINOR >= 1
const char* const kHostMemory[] = {"host", nullptr};
// The fake scores 90 (more than shm's 80) for host all_reduce alone, under AUTO: what a
// vendor's tuned all-reduce declares.
uint32_t Score(const chorus_score_args* args) {
#ifdef FAKE_SCORE_OUT_OF_RANGE
  // A negative int returned as the unsigned score: 4294967295.
  (void)args;
  return static_cast<uint32_t>(-1);
#else
  return args->request == CHORUS_REQUEST_AUTO && args->op == CHORUS_OP_ALL_REDUCE ? 90 : 0;
#endif
}
const chorus_capabilities kCapabilities = [] {
  chorus_capabilities c{};
  c.struct_size = sizeof(c);
  c.memory = kHostMemory;
  c.shape = CHORUS_SHAPE_ANY;
  c.ops = CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE);
#ifdef FAKE_BAD_CAPABILITIES
  c.score = nullptr;
#else
  c.score = Score;
#endif
  return c;
}();
#endif

chorus_collective_api Collective(const char* name, bool scored) {
  chorus_collective_api t{};
#ifdef FAKE_COLLECTIVE_SIZE_ZERO
  t.struct_size = 0;  // never set: the core must ignore the table and say so
#else
  t.struct_size = sizeof(t);
#endif
  t.name = name;
  t.create = CommCreate;
  t.destroy = CommDestroy;
  t.all_reduce = CommAllReduce;
#if CHORUS_ABI_MINOR >= 1
  t.capabilities = scored ? &kCapabilities : nullptr;
#else
  (void)scored;
#endif
  return t;
}

#if defined(FAKE_SCORED) || defined(FAKE_BAD_CAPABILITIES)
const chorus_collective_api kFast = Collective(FAKE_NAME "_fast", true);
const chorus_collective_api kPlain = Collective(FAKE_NAME "_plain", false);
#ifdef FAKE_DUPLICATE_NAMES
const chorus_collective_api kAgain = Collective(FAKE_NAME "_fast", false);
const chorus_collective_api* const kCollectives[] = {&kFast, &kPlain, &kAgain};
#else
const chorus_collective_api* const kCollectives[] = {&kFast, &kPlain};
#endif
#elif defined(FAKE_BLOCKING) || defined(FAKE_COLLECTIVE)
const chorus_collective_api kOnly = Collective(FAKE_NAME, FAKE_COLLECTIVE_SCORED);
#endif

#ifdef FAKE_TWO_ENUMERATORS
// Two device enumerators of no devices (1.1 arrays): enough for the registry to create a context
// of each and for the kit to check each.
struct Context {
  int unused = 0;
};
chorus_status EnumCreate(const chorus_device_context_create_args* args,
                         chorus_device_context** out) {
  if (args == nullptr || out == nullptr) {
    g_error = FAKE_NAME ": create needs args and out";
    return CHORUS_INVALID_ARGUMENT;
  }
  *out = reinterpret_cast<chorus_device_context*>(new Context);
  return CHORUS_OK;
}
void EnumDestroy(chorus_device_context* ctx) { delete reinterpret_cast<Context*>(ctx); }
chorus_status EnumCount(chorus_device_context*, uint32_t* count) {
  *count = 0;
  return CHORUS_OK;
}
chorus_status EnumInfo(chorus_device_context*, uint32_t, chorus_device_info*) {
  g_error = FAKE_NAME ": no device of that index (it has none)";
  return CHORUS_INVALID_ARGUMENT;
}
chorus_status EnumNoDevice(chorus_device_context*, ...) {
  g_error = FAKE_NAME ": it has no devices";
  return CHORUS_INVALID_ARGUMENT;
}
chorus_device_enumerator_api Enumerator(const char* platform) {
  chorus_device_enumerator_api t{};
  t.struct_size = sizeof(t);
  t.platform = platform;
  t.create = EnumCreate;
  t.destroy = EnumDestroy;
  t.device_count = EnumCount;
  t.device_info = EnumInfo;
  t.allocate = [](chorus_device_context* c, uint32_t, size_t, void**) { return EnumNoDevice(c); };
  t.deallocate = [](chorus_device_context* c, uint32_t, void*) { return EnumNoDevice(c); };
  t.copy = [](chorus_device_context* c, const chorus_copy_args*) { return EnumNoDevice(c); };
  t.reduce = [](chorus_device_context* c, const chorus_reduce_kernel_args*) {
    return EnumNoDevice(c);
  };
  t.divide = [](chorus_device_context* c, const chorus_divide_args*) { return EnumNoDevice(c); };
  t.synchronize = [](chorus_device_context* c, uint32_t, chorus_stream*) {
    return EnumNoDevice(c);
  };
  return t;
}
const chorus_device_enumerator_api kEnumeratorA = Enumerator("fakea");
const chorus_device_enumerator_api kEnumeratorB = Enumerator("fakeb");
const chorus_device_enumerator_api* const kEnumerators[] = {&kEnumeratorA, &kEnumeratorB};
#endif

#if CHORUS_ABI_MINOR >= 1 && defined(FAKE_SCORED)
// Two extensions of types no core knows (a vendor's range): the loader must walk and skip them.
struct VendorExtension {
  chorus_extension base;
  int payload;
};
const VendorExtension kSecond = {
    {sizeof(VendorExtension), CHORUS_EXTENSION_VENDOR_FIRST + 2, nullptr}, 2};
const VendorExtension kFirst = {
    {sizeof(VendorExtension), CHORUS_EXTENSION_VENDOR_FIRST + 1, &kSecond.base}, 1};
#endif

#ifdef FAKE_CONTEXTS
// 1.6: the tables' context pointers (handed back in the create, run and score args), the job and
// object id a transport's create gets, and chorus_p2p.last_error in an algorithm's message.
char g_algorithm_tag, g_transport_tag, g_capabilities_tag;
thread_local std::string t_message;
#endif

#ifdef FAKE_ALGORITHM
// An algorithm that implements only the barrier (a zero-byte message to and from every peer) and
// declares 80 for it under AUTO (1.3): the registry pairs it with every transport, and a pair
// runs every other operation on the core's ring. With FAKE_CONTEXTS it checks its context and
// quotes the transport's words; with FAKE_UNKNOWN_SCORE it scores CHORUS_SCORE_UNKNOWN (1.6).
chorus_status AlgorithmRun(const chorus_algorithm_run_args* args) {
  if (args == nullptr || args->p2p == nullptr || args->op != CHORUS_OP_BARRIER) {
    g_error = FAKE_NAME ": only the barrier";
    return CHORUS_UNSUPPORTED;
  }
#ifdef FAKE_CONTEXTS
  if (args->context != &g_algorithm_tag) {
    g_error = FAKE_NAME ": run got another context than the algorithm table's";
    return CHORUS_INVALID_ARGUMENT;
  }
#endif
  const chorus_p2p& p2p = *args->p2p;
  std::vector<chorus_p2p_request*> requests;
  chorus_status status = CHORUS_OK;
  for (int32_t peer = 0; peer < p2p.size && status == CHORUS_OK; ++peer) {
    if (peer == p2p.rank) continue;
    chorus_p2p_args message{sizeof(chorus_p2p_args), peer, 7, nullptr, 0};
    chorus_p2p_request* request = nullptr;
    status = p2p.isend(p2p.ctx, &message, &request);
    if (status == CHORUS_OK) requests.push_back(request);
    if (status == CHORUS_OK) status = p2p.irecv(p2p.ctx, &message, &request);
    if (status == CHORUS_OK) requests.push_back(request);
  }
  for (chorus_p2p_request* request : requests) {
    const chorus_status waited = p2p.wait(p2p.ctx, request, args->timeout_ms);
    if (status == CHORUS_OK) status = waited;
    p2p.free(p2p.ctx, request);
  }
  if (status != CHORUS_OK) g_error = FAKE_NAME ": a message of the barrier failed";
#ifdef FAKE_CONTEXTS
  if (status != CHORUS_OK) {
    t_message =
        std::string(FAKE_NAME ": a message of the barrier failed: ") + p2p.last_error(p2p.ctx);
    g_error = t_message.c_str();
  }
#endif
  return status;
}
#if CHORUS_ABI_MINOR >= 3
const char* const kAlgorithmMemory[] = {"host", nullptr};
uint32_t AlgorithmScore(const chorus_score_args* args) {
#ifdef FAKE_CONTEXTS
  if (args->context != &g_capabilities_tag) return 0;
#endif
#ifdef FAKE_UNKNOWN_SCORE
  return args->request == CHORUS_REQUEST_AUTO ? CHORUS_SCORE_UNKNOWN : 0;
#endif
  return args->request == CHORUS_REQUEST_AUTO ? 80 : 0;
}
const chorus_capabilities kAlgorithmCapabilities = [] {
  chorus_capabilities c{};
  c.struct_size = sizeof(c);
  c.memory = kAlgorithmMemory;
  c.shape = CHORUS_SHAPE_ANY;
  c.ops = CHORUS_OP_BIT(CHORUS_OP_BARRIER);
  c.score = AlgorithmScore;
#ifdef FAKE_CONTEXTS
  c.context = &g_capabilities_tag;
#endif
  return c;
}();
#endif
const chorus_algorithm_api kAlgorithm = [] {
  chorus_algorithm_api t{};
  t.struct_size = sizeof(t);
  t.name = FAKE_NAME;
  t.supported_ops = CHORUS_OP_BIT(CHORUS_OP_BARRIER);
  t.run = AlgorithmRun;
#if CHORUS_ABI_MINOR >= 3
  t.capabilities = &kAlgorithmCapabilities;
#endif
#ifdef FAKE_CONTEXTS
  t.context = &g_algorithm_tag;
#endif
  return t;
}();
#endif

#ifdef FAKE_TRANSPORT
// A transport that carries nothing (every call UNSUPPORTED) and declares 30 under AUTO (1.3;
// with FAKE_SCORE_OUT_OF_RANGE, 250 from 1 MiB; with FAKE_UNKNOWN_SCORE, CHORUS_SCORE_UNKNOWN):
// enough for the registry to pair every algorithm with it, for names and scores to be checked.
chorus_status TransportCreate(const chorus_transport_create_args* args,
                              chorus_transport_endpoint**) {
  g_error = FAKE_NAME ": a transport that carries nothing";
#ifdef FAKE_CONTEXTS
  // What it was handed, in its message: "context ok, job J, task T of N, object O".
  const bool context_ok = args->context == &g_transport_tag;
  t_message = std::string(FAKE_NAME ": a transport that carries nothing (context ") +
              (context_ok ? "ok" : "wrong");
  if (args->job != nullptr) {
    t_message += std::string(", job ") + args->job->id + ", task " +
                 std::to_string(args->job->task_index) + " of " +
                 std::to_string(args->job->num_tasks) + ", object " + args->object_id;
  }
  t_message += ")";
  g_error = t_message.c_str();
#else
  (void)args;
#endif
  return CHORUS_UNSUPPORTED;
}
void TransportDestroy(chorus_transport_endpoint*) {}
chorus_status TransportMessage(chorus_transport_endpoint*, const chorus_p2p_args*,
                               chorus_request**) {
  g_error = FAKE_NAME ": a transport that carries nothing";
  return CHORUS_UNSUPPORTED;
}
void TransportAbort(chorus_transport_endpoint*) {}
#if CHORUS_ABI_MINOR >= 3
const char* const kTransportMemory[] = {"host", nullptr};
uint32_t TransportScore(const chorus_score_args* args) {
  if (args->request != CHORUS_REQUEST_AUTO) return 0;
#ifdef FAKE_UNKNOWN_SCORE
  return CHORUS_SCORE_UNKNOWN;
#endif
#ifdef FAKE_SCORE_OUT_OF_RANGE
  // A vendor's "x 2.5 from 1 MiB" without a clamp: 250, which the core takes as 0.
  if (args->bytes >= (1u << 20)) return 250;
#endif
  return 30;
}
const chorus_capabilities kTransportCapabilities = [] {
  chorus_capabilities c{};
  c.struct_size = sizeof(c);
  c.memory = kTransportMemory;
  c.shape = CHORUS_SHAPE_ANY;
  c.score = TransportScore;
  return c;
}();
#endif
const chorus_transport_api kTransport = [] {
  chorus_transport_api t{};
  t.struct_size = sizeof(t);
  t.name = FAKE_NAME;
  t.create = TransportCreate;
  t.destroy = TransportDestroy;
  t.isend = TransportMessage;
  t.irecv = TransportMessage;
  t.abort = TransportAbort;
#if CHORUS_ABI_MINOR >= 3
  t.capabilities = &kTransportCapabilities;
#endif
#ifdef FAKE_CONTEXTS
  t.context = &g_transport_tag;
#endif
  return t;
}();
#endif

// A plugin table as a later minor version would have it: this header's fields, then one more.
struct NewerTable {
  chorus_plugin base;
  void (*future_slot)(void);
};

// Poison behind a truncated table: the core must not read past struct_size.
const chorus_collective_api* const kPoison =
    reinterpret_cast<const chorus_collective_api*>(static_cast<uintptr_t>(0xdeadbeef));

const NewerTable kTable = [] {
  NewerTable table{};
  chorus_plugin& t = table.base;
#if defined(FAKE_TINY_TABLE)
  t.struct_size = 8;
#elif defined(FAKE_OLDER_MINOR)
  // Built against a header that ended before the collective slot.
  t.struct_size = offsetof(chorus_plugin, collective);
#elif defined(FAKE_NEWER_MINOR)
  t.struct_size = sizeof(NewerTable);
#else
  t.struct_size = sizeof(chorus_plugin);
#endif
  t.abi_major = FAKE_ABI_MAJOR;
  t.abi_minor = FAKE_ABI_MINOR;
  t.name = FAKE_NAME;
  t.version = "0.0.1";
  t.description = "fake plugin for the loader tests";
#ifndef FAKE_NULL_INIT
  t.init = Init;
#endif
  t.shutdown = Shutdown;
  t.last_error = LastError;
  t.request_test = RequestTest;
  t.request_wait = RequestWait;
  t.request_free = RequestFree;
  t.cross_device_ops = &kOps;
#ifdef FAKE_OLDER_MINOR
  t.collective = kPoison;
  t.algorithm = reinterpret_cast<const chorus_algorithm_api*>(kPoison);
  t.transport = reinterpret_cast<const chorus_transport_api*>(kPoison);
#elif defined(FAKE_SCORED) || defined(FAKE_BAD_CAPABILITIES)
  t.collective = kCollectives[0];
#if CHORUS_ABI_MINOR >= 1
  t.collective_list = kCollectives;
  t.num_collectives = sizeof(kCollectives) / sizeof(kCollectives[0]);
#endif
#elif defined(FAKE_BLOCKING) || defined(FAKE_COLLECTIVE)
  t.collective = &kOnly;
#endif
#if CHORUS_ABI_MINOR >= 1 && defined(FAKE_SCORED)
  t.extensions = &kFirst.base;
#endif
#ifdef FAKE_ALGORITHM
  t.algorithm = &kAlgorithm;
#endif
#ifdef FAKE_TRANSPORT
  t.transport = &kTransport;
#endif
#ifdef FAKE_TWO_ENUMERATORS
  t.device_enumerator = kEnumerators[0];
  t.device_enumerator_list = kEnumerators;
  t.num_device_enumerators = 2;
  t.cross_device_ops = nullptr;
#endif
  return table;
}();

}  // namespace

#ifdef FAKE_NO_ENTRY
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get_misspelled(
    const chorus_host*) {
  return &kTable.base;
}
#else
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
#if defined(FAKE_ENTRY_THROWS)
  throw std::runtime_error("fake entry exploded");
#elif defined(FAKE_ENTRY_CRASHES)
  volatile int* volatile nowhere = nullptr;
  *nowhere = 1;  // SIGSEGV, as a plugin with a bad pointer would
  return &kTable.base;
#elif defined(FAKE_ENTRY_HANGS)
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
#elif defined(FAKE_ENTRY_NULL)
  return nullptr;
#else
  return &kTable.base;
#endif
}
#endif
