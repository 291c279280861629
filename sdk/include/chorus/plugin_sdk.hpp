// Optional C++ helpers for writing a chorus plugin. Header-only; everything is inline, so each
// plugin gets its own copy (hidden by the plugin's visibility settings). Nothing here crosses
// the ABI: the helpers turn C++ exceptions into a chorus_status plus the thread's last-error
// message, which is what plugin.h asks of every function.
#ifndef CHORUS_PLUGIN_SDK_HPP_
#define CHORUS_PLUGIN_SDK_HPP_

#include <chorus/plugin.h>

#include <atomic>
#include <chorus/error.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace chorus::sdk {

// The error a plugin function reports: the status to return and the message for last_error().
// The same type the core throws (chorus/error.hpp); the name sdk::Error stays for plugins.
using Error = chorus::Error;

// Builds a message from any streamable parts: Fail(CHORUS_INVALID_ARGUMENT, "count ", n).
template <typename... Parts>
[[noreturn]] void Fail(chorus_status status, const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw Error(status, out.str());
}

// The calling thread's last error in this plugin (plugin.h: last_error()).
inline std::string& LastErrorStorage() {
  static thread_local std::string message;
  return message;
}
inline const char* LastError() { return LastErrorStorage().c_str(); }
inline chorus_status SetError(chorus_status status, std::string message) {
  LastErrorStorage() = std::move(message);
  return status;
}

// Runs `body`, turning every exception into a status and a message. Use it as the whole body of
// every function in a plugin's tables.
template <typename Body>
chorus_status Guard(Body&& body) noexcept {
  try {
    body();
    return CHORUS_OK;
  } catch (const Error& e) {
    return SetError(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return SetError(CHORUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return SetError(CHORUS_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return SetError(CHORUS_INTERNAL, "internal error: unknown exception");
  }
}

// Checks that an argument struct pointer is present and large enough to hold `needed` bytes.
template <typename Args>
const Args& RequireArgs(const Args* args, size_t needed, const char* what) {
  if (args == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": arguments are NULL");
  if (args->struct_size < needed) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": struct_size ", args->struct_size,
         " is smaller than the ", needed, " bytes this plugin needs");
  }
  return *args;
}

// The checks every init() starts with: a host, large enough to read its version, of this
// plugin's ABI major. `plugin` names the plugin in the messages.
inline const chorus_host& RequireHost(const chorus_host* host, const char* plugin) {
  if (host == nullptr) Fail(CHORUS_INVALID_ARGUMENT, plugin, " init: host is NULL");
  if (host->struct_size < CHORUS_STRUCT_SIZE(chorus_host, abi_minor)) {
    Fail(CHORUS_INVALID_ARGUMENT, plugin, " init: host struct_size ", host->struct_size,
         " is too small");
  }
  if (host->abi_major != CHORUS_ABI_MAJOR) {
    Fail(CHORUS_UNSUPPORTED, plugin, " init: built for chorus ABI ", CHORUS_ABI_MAJOR,
         ".x, the core speaks ", host->abi_major, ".", host->abi_minor);
  }
  return *host;
}

// ---- The host's services, kept from init() to shutdown() -------------------------------------
// One slot per plugin library: this header is inline and a plugin's symbols are hidden, so each
// plugin holds its own host. init() sets it, shutdown() clears it (NULL). Every service below is
// a no-op (false) without a host, or with a host that lacks the service.

inline std::atomic<const chorus_host*>& HostSlot() {
  static std::atomic<const chorus_host*> host{nullptr};
  return host;
}
inline void SetHost(const chorus_host* host) { HostSlot().store(host, std::memory_order_release); }
inline const chorus_host* Host() { return HostSlot().load(std::memory_order_acquire); }

// True when a line of `level` would be written.
inline bool LogEnabled(chorus_log_level level) {
  const chorus_host* host = Host();
  return host != nullptr && CHORUS_HAS_FIELD(host, chorus_host, log_enabled) &&
         host->log != nullptr && host->log_enabled != nullptr &&
         host->log_enabled(host->ctx, level) != 0;
}
inline void Log(chorus_log_level level, const std::string& message) {
  if (LogEnabled(level)) {
    const chorus_host* host = Host();
    host->log(host->ctx, level, message.c_str());
  }
}

// True once the core has asked every operation to stop (chorus_host.abort_requested).
inline bool HostAbortRequested() {
  const chorus_host* host = Host();
  return host != nullptr && CHORUS_HAS_FIELD(host, chorus_host, abort_requested) &&
         host->abort_requested != nullptr && host->abort_requested(host->ctx) != 0;
}

// True when the job has a secret (CHORUS_JOB_SECRET or CHORUS_JOB_SECRET_FILE) and the core can
// prove it for this plugin (ABI 1.2): a listener of the plugin then admits only the job's
// processes (sdk/README.md, "Listening: the job secret").
inline bool JobSecretPresent() {
#if CHORUS_ABI_MINOR >= 2
  const chorus_host* host = Host();
  return host != nullptr && CHORUS_HAS_FIELD(host, chorus_host, prove_job_secret) &&
         host->job_secret_present != nullptr && host->prove_job_secret != nullptr &&
         host->job_secret_present(host->ctx) != 0;
#else
  return false;  // built against an older plugin.h, which has no such service
#endif
}

// This process's proof of the job's secret over `message` (the other side's challenge and what
// else it binds) for `role`, as 64 hex digits; nullopt when JobSecretPresent() is false.
inline std::optional<std::string> ProveJobSecret(const char* role, std::string_view message) {
#if CHORUS_ABI_MINOR >= 2
  if (!JobSecretPresent()) return std::nullopt;
  const chorus_host* host = Host();
  uint8_t proof[32];
  if (host->prove_job_secret(host->ctx, role, message.data(), message.size(), proof) != CHORUS_OK) {
    return std::nullopt;
  }
  static const char kHex[] = "0123456789abcdef";
  std::string text;
  for (uint8_t byte : proof) {
    text += kHex[byte >> 4];
    text += kHex[byte & 15];
  }
  return text;
#else
  (void)role;
  (void)message;
  return std::nullopt;
#endif
}

// Equal strings, compared in time that does not depend on where they differ (for proofs).
inline bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return difference == 0;
}

// dst[i] = a[i] op b[i] on host memory with the core's kernel (chorus_host.reduce_host; every
// dtype, SUM/PROD/MIN/MAX; dst may equal a or b). Throws Error with the kernel's status, or
// INTERNAL before init().
inline void ReduceOnHost(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
                         chorus_reduce_op op) {
  if (count == 0) return;
  const chorus_host* host = Host();
  if (host == nullptr || !CHORUS_HAS_FIELD(host, chorus_host, reduce_host) ||
      host->reduce_host == nullptr) {
    Fail(CHORUS_INTERNAL, "the host's reduce kernel is not available (used before init()?)");
  }
  chorus_reduce_kernel_args args{};
  args.struct_size = sizeof(args);
  args.device = CHORUS_HOST_DEVICE;
  args.dst = dst;
  args.a = a;
  args.b = b;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  const chorus_status status = host->reduce_host(host->ctx, &args);
  if (status != CHORUS_OK) {
    Fail(status, "the core's reduce_host kernel failed on ", count, " elements (status ",
         static_cast<int>(status), ")");
  }
}

// ---- The rendezvous store from C++ -------------------------------------------------------------

// A view of a chorus_kv_store (borrowed) that throws Error with the store's status, naming the
// key: what a plugin's rendezvous needs (publish an address, read its peers').
class StoreView {
 public:
  explicit StoreView(const chorus_kv_store* store) : store_(store) {
    if (store == nullptr || store->struct_size < CHORUS_STRUCT_SIZE(chorus_kv_store, remove)) {
      Fail(CHORUS_INVALID_ARGUMENT, "the rendezvous store is NULL or too small");
    }
  }
  void Set(const std::string& key, const std::string& value) const {
    Check(store_->set(store_->ctx, key.c_str(), value.data(), value.size()), "set", key);
  }
  // Waits up to timeout_ms for the key (TIMEOUT naming it otherwise).
  std::string Get(const std::string& key, int64_t timeout_ms) const {
    std::string value(64, '\0');
    size_t size = 0;
    Check(store_->get(store_->ctx, key.c_str(), timeout_ms, value.data(), value.size(), &size),
          "get", key);
    if (size > value.size()) {  // larger than the first guess: read it again whole
      value.resize(size);
      Check(store_->get(store_->ctx, key.c_str(), timeout_ms, value.data(), value.size(), &size),
            "get", key);
    }
    value.resize(size);
    return value;
  }
  int64_t Add(const std::string& key, int64_t delta) const {
    int64_t result = 0;
    Check(store_->add(store_->ctx, key.c_str(), delta, &result), "add", key);
    return result;
  }
  // Whether `key` exists now; does not wait.
  bool Contains(const std::string& key) const {
    int exists = 0;
    Check(store_->check(store_->ctx, key.c_str(), &exists), "check", key);
    return exists != 0;
  }
  // Removes `key`; false when it was absent.
  bool Remove(const std::string& key) const {
    const chorus_status status = store_->remove(store_->ctx, key.c_str());
    if (status == CHORUS_NOT_FOUND) return false;
    Check(status, "remove", key);
    return true;
  }

  // Get that also ends when the work should stop: it waits in slices of at most kAbortSliceMs
  // and throws Error(CHORUS_ABORTED) once the host's abort flag rises (chorus_host's
  // abort_requested: a lost peer, a time-out or a destroy with work pending) or `*aborted` is
  // set (the object's own abort(), called from another thread). TIMEOUT after timeout_ms, as Get.
  // A plugin blocked on its peers' keys calls this, so no plugin writes its own polling loop.
  static constexpr int64_t kAbortSliceMs = 50;
  std::string GetUnlessAborted(const std::string& key, int64_t timeout_ms,
                               const std::atomic<bool>* aborted = nullptr) const {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      if (HostAbortRequested() || (aborted != nullptr && aborted->load())) {
        Fail(CHORUS_ABORTED, "the wait for '", key, "' in the rendezvous store was aborted");
      }
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count();
      const int64_t left = timeout_ms - waited;
      const int64_t slice = left < kAbortSliceMs ? (left > 0 ? left : 0) : kAbortSliceMs;
      std::string value(64, '\0');
      size_t size = 0;
      const chorus_status status =
          store_->get(store_->ctx, key.c_str(), slice, value.data(), value.size(), &size);
      if (status == CHORUS_TIMEOUT && left > slice) continue;
      Check(status, "get", key);
      if (size > value.size()) return Get(key, 0);  // present, and larger than the first guess
      value.resize(size);
      return value;
    }
  }

 private:
  static void Check(chorus_status status, const char* what, const std::string& key) {
    if (status == CHORUS_TIMEOUT) {
      Fail(CHORUS_TIMEOUT, "the rendezvous store's ", what, " of '", key,
           "' timed out: a rank did not arrive (is every rank started, with the same job?)");
    }
    if (status != CHORUS_OK) {
      Fail(status, "the rendezvous store's ", what, " of '", key, "' failed (status ",
           static_cast<int>(status), ")");
    }
  }
  const chorus_kv_store* store_;
};

// Several texts in one value (what a rank publishes through the store) and back: each as
// <decimal length>':'<bytes>, so that any text, with any bytes, comes back as it was written.
inline void PutField(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

// Reads back, in order, what PutField wrote.
class FieldReader {
 public:
  explicit FieldReader(std::string_view text) : text_(text) {}
  // The next field; nullopt for text PutField did not write (or past the end).
  std::optional<std::string> Next() {
    const size_t colon = text_.find(':', at_);
    if (colon == std::string_view::npos || colon == at_) return std::nullopt;
    size_t length = 0;
    for (size_t i = at_; i < colon; ++i) {
      if (text_[i] < '0' || text_[i] > '9' || length > text_.size()) return std::nullopt;
      length = length * 10 + static_cast<size_t>(text_[i] - '0');
    }
    if (length > text_.size() - colon - 1) return std::nullopt;
    at_ = colon + 1 + length;
    return std::string(text_.substr(colon + 1, length));
  }
  bool AtEnd() const { return at_ == text_.size(); }

 private:
  std::string_view text_;
  size_t at_ = 0;
};

// The requests of a plugin that never hands one out: every call is INVALID_ARGUMENT.
inline chorus_status NoRequestTest(chorus_request*, int*) {
  return SetError(CHORUS_INVALID_ARGUMENT,
                  "this plugin completes every operation before returning and never hands out a "
                  "request");
}
inline chorus_status NoRequestWait(chorus_request*, int64_t) {
  return NoRequestTest(nullptr, nullptr);
}
inline void NoRequestFree(chorus_request*) {}

inline void RequireDtype(chorus_dtype dtype, const char* what) {
  if (chorus_dtype_size(dtype) == 0) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": unknown dtype ", static_cast<int>(dtype));
  }
}

// Plugins receive SUM, PROD, MIN and MAX; MEAN is the core's (plugin.h).
inline void RequireReduceOp(chorus_reduce_op op, const char* what) {
  if (op == CHORUS_REDUCE_MEAN) {
    Fail(CHORUS_UNSUPPORTED, what, ": MEAN is resolved by the core, not by plugins");
  }
  if (op < CHORUS_REDUCE_SUM || op > CHORUS_REDUCE_MAX) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": unknown reduce op ", static_cast<int>(op));
  }
}

// The value of option `key`, if given.
inline std::optional<std::string_view> FindOption(const chorus_option* options, size_t count,
                                                  std::string_view key) {
  if (options == nullptr) return std::nullopt;
  for (size_t i = 0; i < count; ++i) {
    if (options[i].key != nullptr && key == options[i].key) {
      return std::string_view(options[i].value == nullptr ? "" : options[i].value);
    }
  }
  return std::nullopt;
}

// A non-negative integer option; `fallback` when absent; an error naming the key when invalid.
inline uint64_t IntegerOption(const chorus_option* options, size_t count, std::string_view key,
                              uint64_t fallback) {
  auto value = FindOption(options, count, key);
  if (!value) return fallback;
  uint64_t result = 0;
  if (value->empty()) Fail(CHORUS_INVALID_ARGUMENT, "option ", key, " is empty");
  for (char c : *value) {
    if (c < '0' || c > '9' || result > (UINT64_MAX - 9) / 10) {
      Fail(CHORUS_INVALID_ARGUMENT, "option ", key, "=", *value, " is not a non-negative integer");
    }
    result = result * 10 + static_cast<uint64_t>(c - '0');
  }
  return result;
}

// ---- The plugin table -------------------------------------------------------------------------
// What every plugin built with these helpers shares: init checks the host (RequireHost), runs
// the plugin's own check when it has one, and keeps the host (SetHost); shutdown forgets it;
// last_error is LastError(); requests are NoRequest* (a plugin that hands out requests sets its
// own three). Fill the result's interface pointers and return it from chorus_plugin_get:
//
//   extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
//     static const chorus_plugin table = [] {
//       chorus_plugin t = chorus::sdk::PluginTable("mine", "1.0.0", "what it does");
//       t.collective = &kCollective;
//       return t;
//     }();
//     return &table;
//   }

struct PluginIdentity {
  const char* name = "plugin";
  // Extra checks at init, after RequireHost (a host service the plugin cannot do without);
  // throws Error. NULL: none.
  void (*check_host)(const chorus_host& host) = nullptr;
};
inline PluginIdentity& PluginIdentitySlot() {
  static PluginIdentity identity;
  return identity;
}

inline chorus_status StandardInit(const chorus_host* host) {
  return Guard([&] {
    const PluginIdentity& identity = PluginIdentitySlot();
    const chorus_host& checked = RequireHost(host, identity.name);
    if (identity.check_host != nullptr) identity.check_host(checked);
    SetHost(host);
  });
}
inline void StandardShutdown() { SetHost(nullptr); }
inline const char* StandardLastError() { return LastError(); }

// `name`, `version` and `description` are static strings.
inline chorus_plugin PluginTable(const char* name, const char* version, const char* description,
                                 void (*check_host)(const chorus_host&) = nullptr) {
  PluginIdentitySlot() = PluginIdentity{name, check_host};
  chorus_plugin table{};
  table.struct_size = sizeof(table);
  table.abi_major = CHORUS_ABI_MAJOR;
  table.abi_minor = CHORUS_ABI_MINOR;
  table.name = name;
  table.version = version;
  table.description = description;
  table.init = StandardInit;
  table.shutdown = StandardShutdown;
  table.last_error = StandardLastError;
  table.request_test = NoRequestTest;
  table.request_wait = NoRequestWait;
  table.request_free = NoRequestFree;
  return table;
}

#if CHORUS_ABI_MINOR >= 1
// ---- Capabilities (1.1)
// --------------------------------------------------------------------------

// chorus_capabilities.memory lists.
inline constexpr const char* kHostMemory[] = {"host", nullptr};
inline constexpr const char* kAnyMemory[] = {"*", nullptr};
// Every operation of a collective; every operation of cross-device ops.
inline constexpr uint32_t kAllCollectiveOps =
    CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) | CHORUS_OP_BIT(CHORUS_OP_BROADCAST) |
    CHORUS_OP_BIT(CHORUS_OP_ALL_GATHER) | CHORUS_OP_BIT(CHORUS_OP_REDUCE_SCATTER) |
    CHORUS_OP_BIT(CHORUS_OP_BARRIER);
inline constexpr uint32_t kAllCrossDeviceOps = CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) |
                                               CHORUS_OP_BIT(CHORUS_OP_BROADCAST) |
                                               CHORUS_OP_BIT(CHORUS_OP_ALL_GATHER);

// The capabilities of a plugin that scores the same for every operation it serves.
inline chorus_capabilities Capabilities(const char* const* memory, chorus_job_shape shape,
                                        uint32_t ops, uint32_t (*score)(const chorus_score_args*),
                                        uint32_t flags = 0) {
  chorus_capabilities capabilities{};
  capabilities.struct_size = sizeof(capabilities);
  capabilities.memory = memory;
  capabilities.shape = shape;
  capabilities.ops = ops;
  capabilities.flags = flags;
  capabilities.score = score;
  return capabilities;
}

// The address at which the other ranks reach this one, and the id of the machine it runs on,
// from communicator or transport create args (1.1 fields): "" when the core did not pass them.
template <typename CreateArgs>
std::string_view CreateAddress(const CreateArgs& args) {
  if (!CHORUS_HAS_FIELD(&args, CreateArgs, address) || args.address == nullptr) return {};
  return args.address;
}
template <typename CreateArgs>
std::string_view CreateHostId(const CreateArgs& args) {
  if (!CHORUS_HAS_FIELD(&args, CreateArgs, host_id) || args.host_id == nullptr) return {};
  return args.host_id;
}
#endif

// ---- 16-bit floating point conversions (round to nearest even) -------------------------------

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      bits = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return sign;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// Element i of a buffer of `dtype`, as a double, for tests and references: 16-bit floats widen
// exactly; an unknown dtype reads as NaN (equal to nothing).
inline double LoadElement(const void* data, size_t i, chorus_dtype dtype) {
  auto as = [&](auto zero) {
    decltype(zero) value;
    std::memcpy(&value, static_cast<const char*>(data) + i * sizeof(value), sizeof(value));
    return value;
  };
  switch (dtype) {
    case CHORUS_F32:
      return as(0.0f);
    case CHORUS_F64:
      return as(0.0);
    case CHORUS_F16:
      return HalfToFloat(as(uint16_t{0}));
    case CHORUS_BF16:
      return Bf16ToFloat(as(uint16_t{0}));
    case CHORUS_I32:
      return as(int32_t{0});
    case CHORUS_I64:
      return static_cast<double>(as(int64_t{0}));
    case CHORUS_U8:
      return as(uint8_t{0});
    case CHORUS_I8:
      return as(int8_t{0});
    default:
      return std::nan("");
  }
}

// Stores `value` as element i of a buffer of `dtype`: 16-bit floats round to nearest even (through
// float), integers truncate toward zero; the value must be in the dtype's range. An unknown dtype
// stores nothing.
inline void StoreElement(void* data, size_t i, chorus_dtype dtype, double value) {
  auto put = [&](auto converted) {
    std::memcpy(static_cast<char*>(data) + i * sizeof(converted), &converted, sizeof(converted));
  };
  switch (dtype) {
    case CHORUS_F32:
      return put(static_cast<float>(value));
    case CHORUS_F64:
      return put(value);
    case CHORUS_F16:
      return put(FloatToHalf(static_cast<float>(value)));
    case CHORUS_BF16:
      return put(FloatToBf16(static_cast<float>(value)));
    case CHORUS_I32:
      return put(static_cast<int32_t>(value));
    case CHORUS_I64:
      return put(static_cast<int64_t>(value));
    case CHORUS_U8:
      return put(static_cast<uint8_t>(value));
    case CHORUS_I8:
      return put(static_cast<int8_t>(value));
    default:
      return;
  }
}

}  // namespace chorus::sdk

#endif  // CHORUS_PLUGIN_SDK_HPP_
