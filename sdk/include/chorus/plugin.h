/*
 * chorus plugin ABI, version 1.6 (what each minor added: sdk/CHANGELOG.md).
 *
 * The only header a chorus plugin needs. C99, no other chorus header, no C++ type crosses it.
 *
 * Rules (see sdk/README.md for the long form):
 *  - A plugin exports exactly one symbol, chorus_plugin_get(), returning a const chorus_plugin
 *    table that lives as long as the library is loaded. Everything else is hidden.
 *  - Every table and every argument struct begins with `size_t struct_size`. The one who fills
 *    the struct sets it to sizeof(its struct). The reader checks it (CHORUS_HAS_FIELD) before it
 *    touches a field: a field beyond struct_size is absent, and an absent slot means
 *    "unsupported". A minor version only appends fields; a major version changes anything else.
 *  - Element structs stored in arrays (chorus_buffer, chorus_option) are frozen: they never grow.
 *    A later minor that needs more adds a new struct and a new field pointing to it.
 *  - Functions return a chorus_status. On anything other than CHORUS_OK the plugin records a
 *    message for the calling thread, which plugin->last_error() returns (like dlerror()).
 *  - Ownership: whoever creates destroys. Inputs are borrowed for the call (for asynchronous
 *    operations: until the request completes). Strings a plugin returns are owned by the plugin
 *    or by the handle that returned them, as written beside each one.
 *  - Every enum ends with a *_MAX_ENUM = 0x7fffffff member: it fixes the enum at 32 bits and makes
 *    every value 0..INT32_MAX a valid value of the type, so a value from a newer minor (a new
 *    dtype, say) read by older C++ code is not undefined behaviour. Reject values you do not
 *    know. Negative values are never valid; a caller must not pass them.
 *  - Streams: a chorus_stream belongs to the enumerator in use and orders work on every device
 *    an operation touches (for cuda: one cudaStream_t; an operation over several devices starts
 *    each device's part after the stream's earlier work and makes the stream wait for every
 *    part, through events). With a non-NULL stream, "completes" means "is enqueued in stream
 *    order"; with NULL it means "has finished". batch_reduce uses the batch's stream and ignores
 *    its reduces' own.
 *  - Out-pointers (chorus_request**, the `out` of create calls) are never NULL.
 *  - Time-outs are in milliseconds; a negative value means "no time-out" and is used only where
 *    a comment allows it. Every blocking call takes one.
 *  - Fields and tables marked "1.1" ("1.2" ... "1.6") are absent when the other side was
 *    built against an older minor: a plugin checks CHORUS_HAS_FIELD (or the host's abi_minor)
 *    before it reads one, and the core does the same with a plugin's tables.
 *  - Context pointers (1.6): every interface table and chorus_capabilities has a `context` the
 *    plugin sets; the core hands it back in the `context` of the args of that table's create
 *    (an algorithm's run) and of the capabilities' score. One function can then serve many
 *    tables (a library's many algorithms, generated at init), which C function pointers alone
 *    cannot tell apart. Under a core older than 1.6 the args have no `context`: a plugin that
 *    needs it checks CHORUS_HAS_FIELD, or declares such tables only when host->abi_minor >= 6.
 */
#ifndef CHORUS_PLUGIN_H_
#define CHORUS_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CHORUS_ABI_MAJOR 1
#define CHORUS_ABI_MINOR 6

/* Name of the one symbol every plugin exports. */
#define CHORUS_PLUGIN_ENTRY_SYMBOL "chorus_plugin_get"

#if defined(__GNUC__)
#define CHORUS_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define CHORUS_PLUGIN_EXPORT
#endif

/* Bytes from the start of `type` up to and including `field`. */
#define CHORUS_STRUCT_SIZE(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

/* Nonzero when the struct at `ptr` (of type `type`, with struct_size first) holds `field`. */
#define CHORUS_HAS_FIELD(ptr, type, field) ((ptr)->struct_size >= CHORUS_STRUCT_SIZE(type, field))

/* ------------------------------------------------------------------------------------------ */
/* Status, data types, reduce operations                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef enum chorus_status {
  CHORUS_OK = 0,
  CHORUS_INVALID_ARGUMENT = 1, /* the caller's fault: a null pointer, a size, a mismatch */
  CHORUS_UNSUPPORTED = 2,      /* valid request this plugin does not implement (dtype, op, ...) */
  CHORUS_TIMEOUT = 3,          /* a wait ran past its time-out; the operation may still be live */
  CHORUS_PEER_LOST = 4,        /* another rank died or closed its connection */
  CHORUS_ABORTED = 5,          /* abort() was called, or the host's abort flag was raised */
  CHORUS_OUT_OF_MEMORY = 6,
  CHORUS_INTERNAL = 7,    /* a bug or a failure of a library underneath */
  CHORUS_NOT_FOUND = 8,   /* a key, device or name that does not exist */
  CHORUS_UNAVAILABLE = 9, /* a resource that exists but cannot be used now (no GPU, no NIC) */
  CHORUS_STATUS_MAX_ENUM = 0x7fffffff
} chorus_status;

/* Values are part of the ABI: never renumbered. */
typedef enum chorus_dtype {
  CHORUS_F32 = 0,
  CHORUS_F64 = 1,
  CHORUS_F16 = 2,  /* IEEE 754 binary16 */
  CHORUS_BF16 = 3, /* bfloat16: the upper half of an f32 */
  CHORUS_I32 = 4,
  CHORUS_I64 = 5,
  CHORUS_U8 = 6,
  CHORUS_I8 = 7,
  CHORUS_DTYPE_COUNT = 8, /* one past the last; grows with minor versions */
  CHORUS_DTYPE_MAX_ENUM = 0x7fffffff
} chorus_dtype;

typedef enum chorus_reduce_op {
  CHORUS_REDUCE_SUM = 0,
  CHORUS_REDUCE_PROD = 1,
  CHORUS_REDUCE_MIN = 2,
  CHORUS_REDUCE_MAX = 3,
  /* MEAN is resolved by the core (SUM, then a divide by n). The core never passes it to a
     plugin's cross-device ops, collective or algorithm; a plugin that gets it may answer
     CHORUS_UNSUPPORTED. Device enumerators' kernels never see it either. */
  CHORUS_REDUCE_MEAN = 4,
  CHORUS_REDUCE_OP_COUNT = 5,
  CHORUS_REDUCE_OP_MAX_ENUM = 0x7fffffff
} chorus_reduce_op;

/* A collective operation: what an algorithm runs, what a score is asked for. Cross-device ops
   map reduce and batch_reduce to ALL_REDUCE. */
typedef enum chorus_collective_op {
  CHORUS_OP_ALL_REDUCE = 0,
  CHORUS_OP_BROADCAST = 1,
  CHORUS_OP_ALL_GATHER = 2,
  CHORUS_OP_REDUCE_SCATTER = 3,
  CHORUS_OP_BARRIER = 4,
  CHORUS_COLLECTIVE_OP_MAX_ENUM = 0x7fffffff
} chorus_collective_op;

#define CHORUS_OP_BIT(op) (1u << (op))

/* Bytes per element; 0 for a value that is not a chorus_dtype. */
static inline size_t chorus_dtype_size(chorus_dtype dtype) {
  switch (dtype) {
    case CHORUS_F64:
    case CHORUS_I64:
      return 8;
    case CHORUS_F32:
    case CHORUS_I32:
      return 4;
    case CHORUS_F16:
    case CHORUS_BF16:
      return 2;
    case CHORUS_U8:
    case CHORUS_I8:
      return 1;
    default:
      return 0;
  }
}

typedef enum chorus_log_level {
  CHORUS_LOG_TRACE = 0,
  CHORUS_LOG_DEBUG = 1,
  CHORUS_LOG_INFO = 2,
  CHORUS_LOG_WARN = 3,
  CHORUS_LOG_ERROR = 4,
  CHORUS_LOG_LEVEL_MAX_ENUM = 0x7fffffff
} chorus_log_level;

/* A key=value setting handed to a create call (from a constructor argument or a variable).
   Frozen element struct. Both strings are borrowed for the call. */
typedef struct chorus_option {
  const char* key;
  const char* value;
} chorus_option;

/* ------------------------------------------------------------------------------------------ */
/* Opaque handles                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* A device queue (a cudaStream_t, a TPU queue). NULL is the device's default, synchronous
   order; host memory always uses NULL. Owned by whoever created it. */
typedef struct chorus_stream chorus_stream;

/* An operation in flight. Created by the plugin, freed by the core with request_free. */
typedef struct chorus_request chorus_request;

typedef struct chorus_device_context chorus_device_context;     /* device enumerator state */
typedef struct chorus_cross_device_ops chorus_cross_device_ops; /* cross-device ops state */
typedef struct chorus_communicator chorus_communicator;         /* collective state */
typedef struct chorus_transport_endpoint chorus_transport_endpoint;
typedef struct chorus_p2p_request chorus_p2p_request;

/* Memory location meaning "host memory" wherever a device index is expected. */
#define CHORUS_HOST_DEVICE UINT32_MAX

/* One buffer on one device: `device` is an index of the device enumerator in use (or
   CHORUS_HOST_DEVICE), `data` an address in that device's memory. Frozen element struct. The
   memory is borrowed for the call, or until the request completes.
   A part of an allocation is addressed as the allocation's address plus the part's byte offset,
   on every enumerator: the core and plugins slice buffers that way (a tensor's slice, a packed
   batch, a reduce-scatter's part). An enumerator whose memory is not byte-addressable (PJRT
   buffers are handles) hands out address ranges of its own and maps each address it is given to
   (allocation, offset), refusing one outside its allocations; it never hands out the handle
   itself (the SDK guide, "Devices whose buffers are handles"). */
typedef struct chorus_buffer {
  uint32_t device;
  void* data;
} chorus_buffer;

/* ------------------------------------------------------------------------------------------ */
/* Host services: what the core hands a plugin                                                */
/* ------------------------------------------------------------------------------------------ */

/* Arguments of an elementwise reduce kernel: dst[i] = a[i] op b[i] for i < count.
   dst may equal a or b; other overlaps are not allowed. op is never MEAN. */
typedef struct chorus_reduce_kernel_args {
  size_t struct_size;
  uint32_t device; /* where the three buffers live */
  void* dst;       /* borrowed */
  const void* a;   /* borrowed */
  const void* b;   /* borrowed */
  size_t count;
  chorus_dtype dtype;
  chorus_reduce_op op;
  chorus_stream* stream; /* borrowed; NULL = default */
} chorus_reduce_kernel_args;

typedef struct chorus_host_collectives chorus_host_collectives; /* 1.1, below */

/* The core's services. The pointer handed to init() stays valid until shutdown() returns. */
typedef struct chorus_host {
  size_t struct_size;
  uint32_t abi_major; /* the core's ABI */
  uint32_t abi_minor;
  void* ctx; /* first argument of every function below; owned by the core */
  /* Writes one log line attributed to the plugin; `message` is borrowed. Thread-safe. */
  void (*log)(void* ctx, chorus_log_level level, const char* message);
  /* Nonzero when a line of this level would be written (skip formatting otherwise). */
  int (*log_enabled)(void* ctx, chorus_log_level level);
  /* Nonzero once the core has asked the work of the calling thread to stop: the communicator or
     cross-device ops whose function this thread is in lost a peer, timed out or is being
     destroyed with work pending (from 1.1), or the whole process is stopping
     (chorus::RequestAbort). Long waits in a plugin poll it and return CHORUS_ABORTED.
     Thread-safe; a thread the plugin started itself sees only the process-wide flag, so the core
     also calls the object's abort() where it has one. */
  int (*abort_requested)(void* ctx);
  /* Host memory from the core's allocator; alignment is a power of two. NULL when out of
     memory. Free with deallocate. Thread-safe. */
  void* (*allocate)(void* ctx, size_t bytes, size_t alignment);
  void (*deallocate)(void* ctx, void* pointer);
  /* The core's elementwise reduce on host memory, for every dtype (args->device is ignored).
     Lets an algorithm or transport plugin reduce without its own f16/bf16 arithmetic. */
  chorus_status (*reduce_host)(void* ctx, const chorus_reduce_kernel_args* args);
  /* 1.1: collectives of other plugins, created for this one (composition; see
     chorus_host_collectives). */
  const chorus_host_collectives* collectives;
  /* 1.2: the job's secret (CHORUS_JOB_SECRET or CHORUS_JOB_SECRET_FILE), so that a plugin's own
     listener admits only the job's processes, as the core's rendezvous store and tcp transport
     do, without the secret ever reaching the plugin. Nonzero when the job has one; without one,
     a listener admits anyone (the core warns once). Thread-safe. */
  int (*job_secret_present)(void* ctx);
  /* Writes HMAC-SHA256(secret, role | message) (each part length-prefixed) to out[0..31]: the
     calling process's proof that it holds the secret, for a challenge-response over the plugin's
     own connection. `message` is the other side's random challenge (and whatever else the
     proof should bind); `role` differs per side, so one side's proof never passes for the
     other's. Both borrowed for the call. CHORUS_UNAVAILABLE when the job has no secret.
     Thread-safe. The plugin compares proofs in constant time. */
  chorus_status (*prove_job_secret)(void* ctx, const char* role, const void* message, size_t size,
                                    uint8_t* out);
} chorus_host;

/* A key-value store shared by all ranks of one job (the rendezvous). The core hands one to each
   communicator and transport, already scoped to a prefix of its own. Thread-safe. This table
   lives until the destroy of the object it was handed to returns; the job's store behind it
   stays served until every rank of the job has left (the rank that serves it waits for the
   others), so what one rank wrote stays readable by the others after that rank's destroy, and
   no plugin needs a wait of its own for that. The core removes no key of a plugin's prefix. */
typedef struct chorus_kv_store {
  size_t struct_size;
  void* ctx; /* owned by the core */
  /* Stores `size` bytes under `key` (overwrites). Both borrowed for the call. Values of up to
     64 MiB; the store is for addresses and ids, not for bulk data. */
  chorus_status (*set)(void* ctx, const char* key, const void* value, size_t size);
  /* Waits up to timeout_ms for `key`, then copies min(capacity, size) bytes into `value` and
     sets *size to the value's full size (call again with a larger buffer when it is bigger).
     CHORUS_TIMEOUT if the key did not appear in time. */
  chorus_status (*get)(void* ctx, const char* key, int64_t timeout_ms, void* value, size_t capacity,
                       size_t* size);
  /* Waits up to timeout_ms until every key exists. */
  chorus_status (*wait)(void* ctx, const char* const* keys, size_t num_keys, int64_t timeout_ms);
  /* Atomically adds delta to the integer stored under key (absent = 0); *result = new value. */
  chorus_status (*add)(void* ctx, const char* key, int64_t delta, int64_t* result);
  /* *exists = 1 if the key is present, else 0. Does not wait. */
  chorus_status (*check)(void* ctx, const char* key, int* exists);
  /* Removes the key; CHORUS_NOT_FOUND if it was absent. */
  chorus_status (*remove)(void* ctx, const char* key);
} chorus_kv_store;

/* ------------------------------------------------------------------------------------------ */
/* Capabilities and scores (1.1): what a collective or cross-device ops can serve, how well   */
/* ------------------------------------------------------------------------------------------ */

/* How the ranks of a job sit on hosts. */
typedef enum chorus_job_shape {
  CHORUS_SHAPE_ANY = 0,      /* any number of ranks on any number of hosts */
  CHORUS_SHAPE_ONE_HOST = 1, /* every rank on one host (shared memory) */
  CHORUS_SHAPE_UNIFORM = 2,  /* the same number of ranks on every host (one host too) */
  CHORUS_JOB_SHAPE_MAX_ENUM = 0x7fffffff
} chorus_job_shape;

/* What the user asked for: tf.distribute's CommunicationImplementation. */
typedef enum chorus_implementation_request {
  CHORUS_REQUEST_AUTO = 0, /* the best for this job */
  CHORUS_REQUEST_RING = 1, /* ring collectives (tf.distribute: over gRPC) */
  CHORUS_REQUEST_NCCL = 2, /* NVIDIA's NCCL, or a library that stands for it on the devices */
  CHORUS_IMPLEMENTATION_REQUEST_MAX_ENUM = 0x7fffffff
} chorus_implementation_request;

/* One operation of one job, for a score. */
typedef struct chorus_score_args {
  size_t struct_size;
  chorus_collective_op op;
  chorus_dtype dtype;
  /* nccl-tests' size: one rank's buffer for all_reduce and broadcast, the whole receive buffer
     of all_gather and send buffer of reduce_scatter, 0 for barrier. Cross-device ops: one
     device's buffer (a batch_reduce: the sum over its reduces). */
  uint64_t bytes;
  int32_t ranks;          /* ranks of the communicator; cross-device ops: devices */
  int32_t hosts;          /* hosts they run on; 1 for cross-device ops */
  int32_t ranks_per_host; /* 0 when hosts run different numbers of ranks */
  const char* memory;     /* "host", or the platform of the devices' enumerator ("cpu", "cuda") */
  chorus_implementation_request request;
  /* 1.6: the `context` of the capabilities whose score is called. */
  void* context;
  /* 1.6: which host each rank runs on: host_of_rank[r] for r < ranks, hosts numbered from 0 in
     the order of their first rank (so rank 0 is on host 0), the same array on every rank. Rank
     r and s share memory when the numbers are equal. NULL when the core does not know (a score
     asked for a shape alone, as chorus-info's table and the kit's grid do): then only `hosts`
     and `ranks_per_host` say it. Borrowed for the call. */
  const uint32_t* host_of_rank;
} chorus_score_args;

/* Scores run from 0 (cannot, or must not be chosen) to CHORUS_SCORE_MAX; AUTO takes the
   highest per operation and size. The bands chorus's own plugins keep (sdk/README.md):
   1-9 works everywhere (the core's references score 5; slower general ones score below them),
   10-49 general purpose and faster than the references, 50-89 specialists for a shape or
   memory (shared memory on one host: 80), 90-100 a vendor's library on its own hardware. */
#define CHORUS_SCORE_MAX 100u

/* 1.6: "I cannot know how well I do here": the plugin's speed depends on what only a
   measurement shows (a library that picks its own wires at run time). Without a measurement
   the core ranks it below every known score above 0 (so AUTO takes it only when nothing else
   serves); it measures it wherever it measures (CHORUS_AUTOTUNE takes it among the candidates
   of every size, beside the best known ones), and a tuning file or cache that names it decides.
   chorus-info shows "unknown". A pair algorithm@transport whose either half is unknown is
   unknown. Only for a core of 1.6 or later (host->abi_minor >= 6): an older core reads any
   value above CHORUS_SCORE_MAX as a broken score, 0. */
#define CHORUS_SCORE_UNKNOWN 0xfffffffeu

/* Flags of chorus_capabilities. */
/* Composes two other collectives by host: takes options local=<collective> and
   cross=<collective>, and the name "local+cross" (e.g. shm+gloo) selects it. */
#define CHORUS_CAPABILITY_COMPOSES_BY_HOST 0x1u

typedef struct chorus_capabilities {
  size_t struct_size;
  /* Memory it serves, a NULL-terminated array of static strings: "host" (plain host memory,
     which is also the cpu enumerator's), a device platform ("cuda", "tpu"), or "*" (the memory
     of any enumerator, through that enumerator's kernels). */
  const char* const* memory;
  chorus_job_shape shape;
  uint32_t ops;   /* CHORUS_OP_BIT of every operation it implements */
  uint32_t flags; /* CHORUS_CAPABILITY_* */
  /* The score of one operation, 0..CHORUS_SCORE_MAX. Called only for an operation in `ops`, on
     memory in `memory`, for a job of `shape`. Pure and cheap: the core calls it while it
     selects, from any thread, and every rank must get the same answer for the same args. It
     may call the host's chorus_host_collectives.best_score. Returns CHORUS_SCORE_UNKNOWN (1.6)
     where only a measurement can say. */
  uint32_t (*score)(const chorus_score_args* args);
  /* 1.6: handed back as chorus_score_args.context; the plugin's own, never read by the core. */
  void* context;
} chorus_capabilities;

/* ------------------------------------------------------------------------------------------ */
/* Interface 1: device enumerator                                                             */
/* ------------------------------------------------------------------------------------------ */

typedef enum chorus_device_kind {
  CHORUS_DEVICE_CPU = 0,
  CHORUS_DEVICE_GPU = 1,
  CHORUS_DEVICE_TPU = 2,
  CHORUS_DEVICE_OTHER = 3,
  CHORUS_DEVICE_KIND_MAX_ENUM = 0x7fffffff
} chorus_device_kind;

/* Filled by device_info. The caller sets struct_size; the plugin fills what fits. Strings are
   owned by the device context and live until its destroy. */
typedef struct chorus_device_info {
  size_t struct_size;
  chorus_device_kind kind;
  uint32_t index;         /* this device's index in the enumerator, 0..count-1 */
  const char* name;       /* e.g. "CPU:0", "GPU:1 (NVIDIA H100)" */
  uint64_t memory_bytes;  /* memory of the device; 0 if unknown */
  int32_t numa_node;      /* -1 if unknown */
  const char* pci_bus_id; /* "0000:17:00.0", or "" when it has none */
  int32_t coords[4];      /* torus coordinates (TPU); -1 where unused */
} chorus_device_info;

/* 1.5: the job a process belongs to, for a plugin whose own runtime must meet the job's other
   processes (a PJRT client's key-value exchange of its devices), and (1.6) for naming what is
   per job. Handed to device contexts (1.5), communicators and transport endpoints (1.6). Owned
   by the core; lives until the destroy of the object it was handed to returns. */
typedef struct chorus_job {
  size_t struct_size;
  /* The same in every process of the job, and different for every job the same hosts run (the
     leader draws it when the job starts): for naming what is per job (a segment, a folder). */
  const char* id;
  uint32_t task_index; /* this process's index among the job's processes; 0 is the leader */
  uint32_t num_tasks;
  /* This host's identity: the same for every process of one host (host name and boot id, or
     CHORUS_HOST_ID), different across hosts. */
  const char* host_id;
  /* The job's rendezvous store, scoped to a prefix of this plugin's own (the job secret, when
     the job has one, guards it as it guards the core's); for a communicator or endpoint, its
     own store (the create args' `store`). */
  const chorus_kv_store* store;
  /* How long a wait for the job's other processes may last (CHORUS_TIMEOUT_SECONDS): a wait
     past it is the job's failure, reported as CHORUS_TIMEOUT naming what did not come. */
  int64_t timeout_ms;
} chorus_job;

typedef struct chorus_device_context_create_args {
  size_t struct_size;
  const chorus_option* options; /* borrowed for the call; e.g. {"count", "4"} for cpu */
  size_t num_options;
  /* 1.5: the job when this process is one of several (InitializeTpuSystem with a cluster of
     several hosts), else NULL. A context made for a job may keep the pointer until destroy; the
     core makes a new context when the process joins a job after the first one was made. */
  const chorus_job* job;
  void* context; /* 1.6: the enumerator table's context */
} chorus_device_context_create_args;

/* dst and src may each be a device index or CHORUS_HOST_DEVICE. */
typedef struct chorus_copy_args {
  size_t struct_size;
  uint32_t dst_device;
  void* dst; /* borrowed */
  uint32_t src_device;
  const void* src; /* borrowed */
  size_t bytes;
  chorus_stream* stream; /* borrowed; NULL = default */
} chorus_copy_args;

/* data[i] /= divisor, for MEAN. Integer types round toward zero (as C division), so a mean of
   integers is exact where a multiply by 1/n in floating point would not be. divisor > 0. */
typedef struct chorus_divide_args {
  size_t struct_size;
  uint32_t device;
  void* data; /* borrowed */
  size_t count;
  chorus_dtype dtype;
  uint64_t divisor;
  chorus_stream* stream;
} chorus_divide_args;

typedef struct chorus_device_enumerator_api {
  size_t struct_size;
  const char* platform; /* "cpu", "cuda", "tpu"; static */
  chorus_status (*create)(const chorus_device_context_create_args* args,
                          chorus_device_context** out);
  void (*destroy)(chorus_device_context* ctx);
  /* Number of devices; 0 is a valid answer (no GPU on this machine). */
  chorus_status (*device_count)(chorus_device_context* ctx, uint32_t* count);
  chorus_status (*device_info)(chorus_device_context* ctx, uint32_t index,
                               chorus_device_info* info);
  /* Memory on a device, freed with deallocate on the same device. */
  chorus_status (*allocate)(chorus_device_context* ctx, uint32_t device, size_t bytes, void** out);
  chorus_status (*deallocate)(chorus_device_context* ctx, uint32_t device, void* pointer);
  /* Kernels. With a NULL stream they complete before returning. */
  chorus_status (*copy)(chorus_device_context* ctx, const chorus_copy_args* args);
  chorus_status (*reduce)(chorus_device_context* ctx, const chorus_reduce_kernel_args* args);
  chorus_status (*divide)(chorus_device_context* ctx, const chorus_divide_args* args);
  /* Waits until everything queued on `stream` of `device` has finished. */
  chorus_status (*synchronize)(chorus_device_context* ctx, uint32_t device, chorus_stream* stream);
  /* 1.4: one line on what drives these devices, for chorus-info and the log (a driver and its
     version; a PJRT plugin's path, C API version and platform). Owned by the context, valid
     until destroy; NULL (the slot or the answer) when there is nothing to say. */
  const char* (*describe)(chorus_device_context* ctx);
  /* 1.6: handed back as the create args' context; the plugin's own, never read by the core. */
  void* context;
} chorus_device_enumerator_api;

/* ------------------------------------------------------------------------------------------ */
/* Interface 2: cross-device ops (local devices, what MirroredStrategy calls)                  */
/* ------------------------------------------------------------------------------------------ */

/* Each context works over the devices of one enumerator, which the core hands it. The
   enumerator table and context are borrowed and outlive the cross-device ops context. */
typedef struct chorus_cross_device_ops_create_args {
  size_t struct_size;
  const chorus_device_enumerator_api* devices_api;
  chorus_device_context* devices;
  const uint32_t* device_indices; /* the replicas' devices, borrowed for the call */
  size_t num_devices;
  const chorus_option* options; /* borrowed for the call; e.g. {"num_packs", "2"} */
  size_t num_options;
  /* The enumerator plugin's last_error(), to quote its message when a kernel fails. */
  const char* (*devices_last_error)(void);
  void* context; /* 1.6: the cross-device ops table's context */
} chorus_cross_device_ops_create_args;

/* Reduces num_inputs buffers of `count` elements elementwise and writes the result to every
   output buffer. An all-reduce is a reduce whose outputs are its inputs (in place allowed). */
typedef struct chorus_reduce_args {
  size_t struct_size;
  chorus_dtype dtype;
  chorus_reduce_op op; /* never MEAN */
  size_t count;        /* elements in every input and output */
  const chorus_buffer* inputs;
  size_t num_inputs;
  const chorus_buffer* outputs;
  size_t num_outputs;
  chorus_stream* stream;
} chorus_reduce_args;

/* Several independent reduces in one call, so the plugin can fuse them (packing). */
typedef struct chorus_batch_reduce_args {
  size_t struct_size;
  const chorus_reduce_args* const* reduces; /* borrowed array of borrowed pointers */
  size_t num_reduces;
  chorus_stream* stream;
} chorus_batch_reduce_args;

typedef struct chorus_broadcast_args {
  size_t struct_size;
  chorus_dtype dtype;
  size_t count;
  chorus_buffer source;
  const chorus_buffer* outputs;
  size_t num_outputs;
  chorus_stream* stream;
} chorus_broadcast_args;

/* Concatenates the inputs in order (input i has counts[i] elements) into every output, which
   holds the sum of counts. */
typedef struct chorus_all_gather_args {
  size_t struct_size;
  chorus_dtype dtype;
  const chorus_buffer* inputs;
  const size_t* counts;
  size_t num_inputs;
  const chorus_buffer* outputs;
  size_t num_outputs;
  chorus_stream* stream;
} chorus_all_gather_args;

/* 1.5: reduces the inputs elementwise (each holds count * num_outputs elements) and writes part
   j of the result, elements [j * count, (j + 1) * count), to output j, which holds count. One
   input and one output per replica, in the same order (num_inputs == num_outputs). */
typedef struct chorus_cross_device_reduce_scatter_args {
  size_t struct_size;
  chorus_dtype dtype;
  chorus_reduce_op op; /* never MEAN */
  size_t count;        /* elements of each output */
  const chorus_buffer* inputs;
  size_t num_inputs;
  const chorus_buffer* outputs;
  size_t num_outputs;
  chorus_stream* stream;
} chorus_cross_device_reduce_scatter_args;

/* Each operation either completes before it returns and sets *request to NULL, or returns a
   request the core waits on and frees. Buffers must stay valid until then. Every operation
   needs at least one input and one output (INVALID_ARGUMENT otherwise); count 0 is valid and
   does nothing. device_indices at create hold distinct devices (one per replica). */
typedef struct chorus_cross_device_ops_api {
  size_t struct_size;
  const char* name; /* what CHORUS_CROSS_DEVICE_OPS selects, e.g. "hierarchical_copy"; static */
  chorus_status (*create)(const chorus_cross_device_ops_create_args* args,
                          chorus_cross_device_ops** out);
  void (*destroy)(chorus_cross_device_ops* ops);
  chorus_status (*reduce)(chorus_cross_device_ops* ops, const chorus_reduce_args* args,
                          chorus_request** request);
  chorus_status (*batch_reduce)(chorus_cross_device_ops* ops, const chorus_batch_reduce_args* args,
                                chorus_request** request);
  chorus_status (*broadcast)(chorus_cross_device_ops* ops, const chorus_broadcast_args* args,
                             chorus_request** request);
  chorus_status (*all_gather)(chorus_cross_device_ops* ops, const chorus_all_gather_args* args,
                              chorus_request** request);
  /* 1.1: what it serves and how well; static. NULL: it is chosen only by name, never by AUTO. */
  const chorus_capabilities* capabilities;
  /* 1.5: NULL (or absent) when the plugin has none: the core then reduces to one device and
     copies each replica's part. Declare CHORUS_OP_REDUCE_SCATTER in capabilities->ops to be
     routed to under AUTO. */
  chorus_status (*reduce_scatter)(chorus_cross_device_ops* ops,
                                  const chorus_cross_device_reduce_scatter_args* args,
                                  chorus_request** request);
  /* 1.6: handed back as the create args' context; the plugin's own, never read by the core. */
  void* context;
} chorus_cross_device_ops_api;

/* ------------------------------------------------------------------------------------------ */
/* Interface 3: collective (a communicator across workers)                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct chorus_communicator_create_args {
  size_t struct_size;
  int32_t rank;
  int32_t size;
  const chorus_kv_store* store; /* scoped to this communicator; lives until destroy returns */
  int64_t timeout_ms;           /* for the set-up and the default for every operation */
  const chorus_option* options; /* borrowed for the call; e.g. {"algorithm", "ring_chunked"} */
  size_t num_options;
  /* Where the buffers live: NULL devices_api means host memory. Borrowed; outlives the
     communicator. */
  const chorus_device_enumerator_api* devices_api;
  chorus_device_context* devices;
  uint32_t device;
  const char* (*devices_last_error)(void); /* as in chorus_cross_device_ops_create_args */
  /* 1.1: where the other ranks reach this one (a host name or address from the cluster spec;
     NULL: 127.0.0.1), and which machine it runs on (ranks with equal host_id share memory:
     CHORUS_HOST_ID, else host name and boot id). Both borrowed for the call. */
  const char* address;
  const char* host_id;
  void* context; /* 1.6: the collective table's context */
  /* 1.6: the job (see chorus_job): its id, this process's task index among the job's tasks
     (which differs from `rank` in a communicator of part of the job), this host's identity, the
     communicator's store (the same as `store`) and time-out. Never NULL from a 1.6 core. Lives
     until destroy returns. */
  const chorus_job* job;
  /* 1.6: the same on every rank of this communicator, different for every other communicator
     or endpoint of the job and for every other job ("<job id>-<16 hex digits>", at most 64
     characters of [A-Za-z0-9_.-]): for naming what belongs to this object alone (a
     shared-memory segment, a socket folder) without agreeing on a name through the store.
     Lives until destroy returns. */
  const char* object_id;
} chorus_communicator_create_args;

/* recv may equal send (in place). Every rank passes the same count, dtype and op; a plugin that
   detects a mismatch fails with CHORUS_INVALID_ARGUMENT naming it. */
typedef struct chorus_all_reduce_args {
  size_t struct_size;
  const void* send;
  void* recv;
  size_t count;
  chorus_dtype dtype;
  chorus_reduce_op op;
  chorus_stream* stream;
} chorus_all_reduce_args;

typedef struct chorus_collective_broadcast_args {
  size_t struct_size;
  void* data; /* root: the source; others: the destination */
  size_t count;
  chorus_dtype dtype;
  int32_t root;
  chorus_stream* stream;
} chorus_collective_broadcast_args;

/* recv holds size * count elements, rank r's block at r * count. */
typedef struct chorus_collective_all_gather_args {
  size_t struct_size;
  const void* send;
  void* recv;
  size_t count; /* per rank */
  chorus_dtype dtype;
  chorus_stream* stream;
} chorus_collective_all_gather_args;

/* send holds size * recv_count elements; rank r receives the reduction of block r. */
typedef struct chorus_reduce_scatter_args {
  size_t struct_size;
  const void* send;
  void* recv;
  size_t recv_count;
  chorus_dtype dtype;
  chorus_reduce_op op;
  chorus_stream* stream;
} chorus_reduce_scatter_args;

typedef struct chorus_collective_api {
  size_t struct_size;
  const char* name; /* what CHORUS_COMMUNICATION selects, e.g. "gloo"; static */
  chorus_status (*create)(const chorus_communicator_create_args* args, chorus_communicator** out);
  void (*destroy)(chorus_communicator* comm);
  chorus_status (*all_reduce)(chorus_communicator* comm, const chorus_all_reduce_args* args,
                              chorus_request** request);
  chorus_status (*broadcast)(chorus_communicator* comm,
                             const chorus_collective_broadcast_args* args,
                             chorus_request** request);
  chorus_status (*all_gather)(chorus_communicator* comm,
                              const chorus_collective_all_gather_args* args,
                              chorus_request** request);
  chorus_status (*reduce_scatter)(chorus_communicator* comm, const chorus_reduce_scatter_args* args,
                                  chorus_request** request);
  chorus_status (*barrier)(chorus_communicator* comm, chorus_request** request);
  /* Makes every pending and later operation fail with CHORUS_ABORTED. Safe to call from any
     thread, while other threads are inside the communicator's functions. */
  void (*abort)(chorus_communicator* comm);
  /* 1.1: what it serves and how well; static. NULL: it is chosen only by name, never by AUTO. */
  const chorus_capabilities* capabilities;
  /* 1.6: handed back as the create args' context; the plugin's own, never read by the core. */
  void* context;
} chorus_collective_api;

/* ------------------------------------------------------------------------------------------ */
/* Interface 5: transport (point-to-point between ranks)                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct chorus_transport_create_args {
  size_t struct_size;
  int32_t rank;
  int32_t size;
  const chorus_kv_store* store; /* to publish and find addresses; lives until destroy */
  int64_t timeout_ms;
  const chorus_option* options; /* borrowed for the call; e.g. {"interface", "lo"} */
  size_t num_options;
  /* 1.1: as in chorus_communicator_create_args. */
  const char* address;
  const char* host_id;
  /* 1.6: as in chorus_communicator_create_args. */
  void* context; /* the transport table's context */
  const chorus_job* job;
  const char* object_id;
} chorus_transport_create_args;

/* What every transport must do. The conformance kit checks each rule and names it when it
   fails ("breaks plugin.h transport rule T2").
   T1 (order): messages between one pair of ranks with the same tag arrive in the order sent;
      tags are independent of each other.
   T2 (receives in any order): a receive may be posted before or after its send, and receives of
      different tags in another order than the sends. No send may wait for receives to be posted
      in send order: a transport either buffers unexpected messages (without a bound that can
      block the connection: a capped buffer that stops reading deadlocks), or holds a large
      message at the sender until its receive is posted (rendezvous: the sender announces it,
      the receiver asks for it when the receive is posted), while later messages of other tags
      still get through: a message of at most 64 KiB whose send was started and whose receive is
      posted completes within 5 s, whatever else is pending. The core's tcp buffers; ucx and the
      socket template do rendezvous.
   T3 (exact size): a receive names the exact byte count sent; another count fails with
      CHORUS_INVALID_ARGUMENT on the receiver.
   T4 (lost peer): when a peer dies or closes its endpoint, every pending and later send to it
      and receive from it completes with CHORUS_PEER_LOST (CHORUS_ABORTED after an abort) within
      5 s, last_error naming the peer; a send to a lost peer never hangs, whatever its size.
   T5 (abort): after abort(), every pending request completes with CHORUS_ABORTED within 5 s and
      later calls fail with CHORUS_ABORTED.
   T6 (time-outs): request_wait returns CHORUS_TIMEOUT at its timeout_ms and leaves the request
      live; destroy returns within the create's timeout_ms even when peers are gone. */
typedef struct chorus_p2p_args {
  size_t struct_size;
  int32_t peer;
  uint64_t tag;
  void* data; /* send: read from; recv: written to. Borrowed until the request completes */
  size_t bytes;
} chorus_p2p_args;

typedef struct chorus_transport_api {
  size_t struct_size;
  const char* name; /* e.g. "tcp", "ucx"; static */
  chorus_status (*create)(const chorus_transport_create_args* args,
                          chorus_transport_endpoint** out);
  void (*destroy)(chorus_transport_endpoint* endpoint);
  /* Start a send or a receive; the request completes when the buffer may be reused. */
  chorus_status (*isend)(chorus_transport_endpoint* endpoint, const chorus_p2p_args* args,
                         chorus_request** request);
  chorus_status (*irecv)(chorus_transport_endpoint* endpoint, const chorus_p2p_args* args,
                         chorus_request** request);
  /* As chorus_collective_api.abort. */
  void (*abort)(chorus_transport_endpoint* endpoint);
  /* 1.3: where it carries messages and how well, for the collectives "algorithm@transport" the
     core makes of every algorithm and transport it has loaded (see chorus_algorithm_api). memory:
     {"host"}; shape: CHORUS_SHAPE_ONE_HOST for a transport that reaches only ranks on one host
     (shared memory), else ANY; ops: ignored (the algorithm's count); score(args): how well it
     carries the messages of that operation, 0..CHORUS_SCORE_MAX (the core's tcp: 10 for AUTO, 50
     for RING). Static. NULL: its pairs are chosen by name only, never by AUTO. */
  const chorus_capabilities* capabilities;
  /* 1.6: handed back as the create args' context; the plugin's own, never read by the core. */
  void* context;
} chorus_transport_api;

/* ------------------------------------------------------------------------------------------ */
/* Interface 4: algorithm (a collective written against point-to-point operations)            */
/* ------------------------------------------------------------------------------------------ */

/* Point-to-point operations the core hands an algorithm: over a transport plugin or the core's
   own TCP. Borrowed for the run. */
typedef struct chorus_p2p {
  size_t struct_size;
  void* ctx; /* owned by the core */
  int32_t rank;
  int32_t size;
  chorus_status (*isend)(void* ctx, const chorus_p2p_args* args, chorus_p2p_request** request);
  chorus_status (*irecv)(void* ctx, const chorus_p2p_args* args, chorus_p2p_request** request);
  /* Waits up to timeout_ms; CHORUS_TIMEOUT leaves the request live. */
  chorus_status (*wait)(void* ctx, chorus_p2p_request* request, int64_t timeout_ms);
  /* *done = 1 when finished (the return value is then the operation's status). */
  chorus_status (*test)(void* ctx, chorus_p2p_request* request, int* done);
  /* Frees a request that finished, or whose endpoint was aborted. */
  void (*free)(void* ctx, chorus_p2p_request* request);
  /* 1.6: the message of the last call of this thread through this chorus_p2p that did not
     return CHORUS_OK (the transport's own words, naming the peer), for the algorithm's error.
     Owned by the core, valid until the thread's next call through it. Never NULL. */
  const char* (*last_error)(void* ctx);
} chorus_p2p;

/* One collective on host memory. Fields as in the collective's argument structs: for
   ALL_REDUCE count elements; BROADCAST uses recv as data and root; ALL_GATHER count per rank;
   REDUCE_SCATTER count = recv_count. */
typedef struct chorus_algorithm_run_args {
  size_t struct_size;
  chorus_collective_op op;
  const void* send;
  void* recv;
  size_t count;
  chorus_dtype dtype;
  chorus_reduce_op op_reduce; /* never MEAN */
  int32_t root;
  const chorus_p2p* p2p;
  int64_t timeout_ms;
  const chorus_option* options; /* borrowed for the call */
  size_t num_options;
  void* context; /* 1.6: the algorithm table's context */
} chorus_algorithm_run_args;

typedef struct chorus_algorithm_api {
  size_t struct_size;
  const char* name;       /* e.g. "ring", "recursive_doubling"; static */
  uint32_t supported_ops; /* CHORUS_OP_BIT(...) of every op run() implements */
  /* Runs the collective to completion on the calling thread. Reduces with host->reduce_host.
     Thread-safe across different p2p contexts. */
  chorus_status (*run)(const chorus_algorithm_run_args* args);
  /* 1.3: how well it serves each operation and size, for AUTO. The core makes a collective
     "<algorithm>@<transport>" of every algorithm and transport it has loaded (the core's ring
     over its tcp is "ring@tcp", also called core_ring), and scores it
     algorithm score x transport score / CHORUS_SCORE_MAX, both asked with the same args (the
     core's ring: 50 for AUTO, 100 for RING; so ring@tcp scores 5 and 50). memory: {"host"};
     ops: a subset of supported_ops. Static. NULL: its pairs are chosen by name only. */
  const chorus_capabilities* capabilities;
  /* 1.6: handed back as the run args' context; the plugin's own, never read by the core. */
  void* context;
} chorus_algorithm_api;

/* ------------------------------------------------------------------------------------------ */
/* Composition (1.1): collectives the host creates for a plugin                                */
/* ------------------------------------------------------------------------------------------ */

/* A communicator of another collective, created by the core for the plugin that asked. */
typedef struct chorus_host_communicator chorus_host_communicator;

typedef struct chorus_host_communicator_create_args {
  size_t struct_size;
  /* A collective's name as CHORUS_COMMUNICATION takes it (its own name or its plugin's), or
     NULL or "AUTO" for the one the core's selection picks for this sub-job (never one of the
     asking plugin's own collectives). */
  const char* collective;
  int32_t rank;
  int32_t size;
  /* The asking plugin's store; the sub-communicator keeps its keys under store_prefix in it.
     Borrowed: must live until destroy returns. */
  const chorus_kv_store* store;
  const char* store_prefix;
  int64_t timeout_ms;           /* for the set-up and every operation */
  const chorus_option* options; /* handed to the collective's create; borrowed for the call */
  size_t num_options;
  int32_t hosts; /* the sub-job's shape, for AUTO (see chorus_score_args) */
  int32_t ranks_per_host;
  const char* address; /* as in chorus_communicator_create_args; borrowed for the call */
  const char* host_id;
} chorus_host_communicator_create_args;

/* Host services for composing collectives: a plugin's communicator runs some of its work on
   communicators of other collectives (hierarchical: one within each host, one across hosts). The
   core finds and creates them, so no plugin links another. Every function takes the host's ctx
   first; operations complete (or fail) before they return, within the communicator's time-out,
   on host memory; MEAN is allowed. A failure's message is the calling thread's last_error(). */
struct chorus_host_collectives {
  size_t struct_size;
  chorus_status (*create)(void* ctx, const chorus_host_communicator_create_args* args,
                          chorus_host_communicator** out);
  void (*destroy)(void* ctx, chorus_host_communicator* comm);
  /* The collective's name (for AUTO: the one chosen); owned by comm. */
  const char* (*name)(void* ctx, chorus_host_communicator* comm);
  chorus_status (*all_reduce)(void* ctx, chorus_host_communicator* comm,
                              const chorus_all_reduce_args* args);
  chorus_status (*broadcast)(void* ctx, chorus_host_communicator* comm,
                             const chorus_collective_broadcast_args* args);
  chorus_status (*all_gather)(void* ctx, chorus_host_communicator* comm,
                              const chorus_collective_all_gather_args* args);
  chorus_status (*reduce_scatter)(void* ctx, chorus_host_communicator* comm,
                                  const chorus_reduce_scatter_args* args);
  chorus_status (*barrier)(void* ctx, chorus_host_communicator* comm);
  /* As chorus_collective_api.abort. */
  void (*abort)(void* ctx, chorus_host_communicator* comm);
  /* The highest score any collective declares for `args`, and its name (static; "" when none
     scores above 0), leaving out the asking plugin's collectives and those of every plugin whose
     best_score call is running on this thread (two composing plugins asking about each other
     end there). For a composing plugin's own score function. */
  chorus_status (*best_score)(void* ctx, const chorus_score_args* args, uint32_t* score,
                              const char** name);
  /* Message of the last failed call of this thread into these services; owned by the core,
     valid until the thread's next call. Never NULL. */
  const char* (*last_error)(void* ctx);
};

/* ------------------------------------------------------------------------------------------ */
/* Extensions (1.1): optional interfaces added later without growing the plugin table         */
/* ------------------------------------------------------------------------------------------ */

/* Every extension struct begins with this base (as PJRT's PJRT_Extension_Base); `type` says
   which struct it is. The core walks the chain from chorus_plugin.extensions and skips every
   type it does not know, so a plugin may offer extensions that only newer cores use. Types
   below 0x10000 are chorus's (1.4 defines the first: CHORUS_EXTENSION_DEVICE_PROGRAMS, below);
   0x10000 and above are free for a vendor's private agreements. */
typedef struct chorus_extension {
  size_t struct_size;
  uint32_t type;
  const struct chorus_extension* next; /* NULL ends the chain */
} chorus_extension;

#define CHORUS_EXTENSION_VENDOR_FIRST 0x10000u

/* ------------------------------------------------------------------------------------------ */
/* Extension 1 (1.4): device programs                                                         */
/* ------------------------------------------------------------------------------------------ */

/* Devices that run compiled programs (a PJRT plugin's TPUs, GPUs through XLA) offer them here,
   so that a strategy can run a whole replica step, its cross-replica reductions inside, as one
   program per dispatch (TPUStrategy's compiled step). The extension serves the device contexts
   of the plugin's enumerator whose platform is `platform`. */
#define CHORUS_EXTENSION_DEVICE_PROGRAMS 1u

typedef struct chorus_device_program chorus_device_program; /* a compiled program */

typedef struct chorus_program_compile_args {
  size_t struct_size;
  /* "stablehlo": MLIR text of a module whose public function @main is one replica's step;
     its collectives (all_reduce, ...) span the replicas. Borrowed for the call. */
  const char* format;
  const char* code; /* borrowed for the call; code_size bytes, not NUL-terminated */
  size_t code_size;
  /* Replica r runs on device device_indices[r]; borrowed for the call. */
  const uint32_t* device_indices;
  size_t num_replicas;
  /* One execute runs @main `steps` times (1 or more). @main's first `num_carried` arguments are
     carried: after each step, result i (i < num_carried, of the same type) is argument i of the
     next. Its other arguments are the step's inputs, given anew for every step; its results from
     num_carried on are the step's outputs, kept for every step. */
  uint32_t steps;
  uint32_t num_carried;
} chorus_program_compile_args;

/* A replica's buffers in execute, filled by signature(). The arrays are owned by the program and
   live until its destroy. */
typedef struct chorus_program_signature {
  size_t struct_size;
  /* The carried arguments, then the inputs of step 0, of step 1, ...: the bytes of each. */
  size_t num_arguments;
  const uint64_t* argument_bytes;
  /* The carried values after the last step, then the outputs of step 0, of step 1, ... */
  size_t num_results;
  const uint64_t* result_bytes;
} chorus_program_signature;

typedef struct chorus_program_execute_args {
  size_t struct_size;
  chorus_device_program* program;
  /* Replica r's buffers: arguments[r * num_arguments + i] and results[r * num_results + j], on
     the replica's device, each the whole of an allocation of exactly its signature's bytes.
     A result may be the allocation of an argument (a carried parameter updated in place); the
     arguments are read before any result is written. Borrowed for the call. */
  void* const* arguments;
  size_t num_arguments; /* per replica */
  void* const* results;
  size_t num_results; /* per replica */
  int64_t timeout_ms; /* the longest execute may wait for the devices */
} chorus_program_execute_args;

typedef struct chorus_device_programs_extension {
  chorus_extension base; /* type CHORUS_EXTENSION_DEVICE_PROGRAMS */
  const char* platform;  /* the enumerator whose contexts the functions take, e.g. "pjrt"; static */
  /* Compiles for the replicas; a program the devices cannot run is CHORUS_INVALID_ARGUMENT or
     CHORUS_UNSUPPORTED with the compiler's words in last_error. The program lives until destroy
     and must be destroyed before the context. */
  chorus_status (*compile)(chorus_device_context* ctx, const chorus_program_compile_args* args,
                           chorus_device_program** out);
  chorus_status (*signature)(chorus_device_program* program, chorus_program_signature* out);
  /* Runs every replica's steps; completes before it returns. */
  chorus_status (*execute)(chorus_device_context* ctx, const chorus_program_execute_args* args);
  void (*destroy)(chorus_device_program* program);
} chorus_device_programs_extension;

/* ------------------------------------------------------------------------------------------ */
/* The plugin table                                                                           */
/* ------------------------------------------------------------------------------------------ */

typedef struct chorus_plugin {
  size_t struct_size;
  uint32_t abi_major; /* CHORUS_ABI_MAJOR of the header the plugin was built with */
  uint32_t abi_minor;
  const char* name;        /* e.g. "hierarchical"; [a-z0-9_-]+, matches libchorus-<name>.so */
  const char* version;     /* the plugin's own version, free form */
  const char* description; /* one line */
  /* Called once after the core accepts the table, before any other function; `host` lives
     until shutdown returns. A failure (with last_error set) makes the core skip the plugin.
     After shutdown the core may call init again. */
  chorus_status (*init)(const chorus_host* host);
  /* Called after every object the plugin created was destroyed. */
  void (*shutdown)(void);
  /* Message of the last failed call made by this thread into this plugin. Owned by the plugin;
     valid until this thread's next call into it. Never NULL (an empty string at worst). */
  const char* (*last_error)(void);
  /* Requests of every interface below. test: *done = 1 when finished, and the return value is
     then the operation's status. wait: up to timeout_ms; CHORUS_TIMEOUT leaves it live.
     free: on a finished request, or one whose communicator/endpoint was aborted. */
  chorus_status (*request_test)(chorus_request* request, int* done);
  chorus_status (*request_wait)(chorus_request* request, int64_t timeout_ms);
  void (*request_free)(chorus_request* request);
  /* The interfaces this plugin provides; NULL where it provides none. Static tables. */
  const chorus_device_enumerator_api* device_enumerator;
  const chorus_cross_device_ops_api* cross_device_ops;
  const chorus_collective_api* collective;
  const chorus_algorithm_api* algorithm;
  const chorus_transport_api* transport;
  /* 1.1: every implementation of each interface, for a library that ships several (three
     algorithms, say): arrays of num_* pointers to static tables; NULL/0 where it has none. When
     an array is given, the core uses it and ignores the single pointer of that interface above;
     set that pointer to the array's first table anyway, so that a 1.0 core sees one. Names are
     unique within an interface (the core keeps the first table of a name it has seen). */
  const chorus_device_enumerator_api* const* device_enumerator_list;
  size_t num_device_enumerators;
  const chorus_cross_device_ops_api* const* cross_device_ops_list;
  size_t num_cross_device_ops;
  const chorus_collective_api* const* collective_list;
  size_t num_collectives;
  const chorus_algorithm_api* const* algorithm_list;
  size_t num_algorithms;
  const chorus_transport_api* const* transport_list;
  size_t num_transports;
  /* 1.1: the first of a chain of extensions; NULL for none. Static. */
  const chorus_extension* extensions;
} chorus_plugin;

/* Fields a table must hold for the core to use the plugin at all. */
#define CHORUS_PLUGIN_MIN_SIZE CHORUS_STRUCT_SIZE(chorus_plugin, request_free)

/* The entry point. `host` is borrowed for the call (it is handed again to init). Returns a
   table that lives as long as the library, or NULL when the plugin cannot run here. Must be
   cheap and free of side effects: the core calls it to list plugins it will not use. */
typedef const chorus_plugin* (*chorus_plugin_get_fn)(const chorus_host* host);

CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host* host);

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_PLUGIN_H_ */
