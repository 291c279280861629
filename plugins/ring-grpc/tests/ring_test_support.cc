#include "ring_test_support.h"

#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/plugin_library.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace chorus::ring_grpc::test {
namespace {

const PluginLibrary& Library() {
  static const std::shared_ptr<PluginLibrary> library = [] {
    std::string reason;
    auto loaded = PluginLibrary::Load(CHORUS_RING_GRPC_PLUGIN_FILE, &reason);
    if (loaded == nullptr) {
      throw std::runtime_error(std::string("cannot load ") + CHORUS_RING_GRPC_PLUGIN_FILE + ": " +
                               reason);
    }
    return loaded;
  }();
  return *library;
}

}  // namespace

const chorus_collective_api& Collective() {
  const chorus_collective_api* api = Library().collective();
  if (api == nullptr) throw std::runtime_error("the plugin provides no collective");
  return *api;
}

std::string LastError() { return Library().LastError(); }

void CommunicatorDeleter::operator()(chorus_communicator* comm) const {
  Collective().destroy(comm);
}

struct TestStore::State {
  explicit State(std::shared_ptr<KvStore> store) : table(std::move(store)) {}
  CKvStore table;
};

TestStore::TestStore() : state_(std::make_unique<State>(MakeInProcessStore())) {}
TestStore::~TestStore() = default;
const chorus_kv_store* TestStore::get() const { return state_->table.get(); }

chorus_status CreateCommunicator(int rank, int size, const TestStore& store, int64_t timeout_ms,
                                 const Options& options, CommunicatorPtr* out) {
  std::vector<chorus_option> raw;
  for (const auto& [key, value] : options) raw.push_back({key.c_str(), value.c_str()});
  chorus_communicator_create_args args{};
  args.struct_size = sizeof(args);
  args.rank = rank;
  args.size = size;
  args.store = store.get();
  args.timeout_ms = timeout_ms;
  args.options = raw.data();
  args.num_options = raw.size();
  chorus_communicator* comm = nullptr;
  const chorus_status status = Collective().create(&args, &comm);
  out->reset(comm);
  return status;
}

void RunRing(int size, int64_t timeout_ms, const Options& options,
             const std::function<void(int rank, CommunicatorPtr& comm)>& body) {
  Collective();  // load the plugin here, where a failure fails the test rather than a thread
  TestStore store;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&, rank] {
      CommunicatorPtr comm;
      const chorus_status status =
          CreateCommunicator(rank, size, store, timeout_ms, options, &comm);
      ASSERT_EQ(status, CHORUS_OK) << "rank " << rank << ": " << LastError();
      body(rank, comm);
    });
  }
  for (auto& rank : ranks) rank.join();
}

std::vector<uint8_t> Encode(chorus_dtype dtype, const std::vector<double>& values) {
  if (chorus_dtype_size(dtype) == 0) throw std::invalid_argument("Encode: unknown dtype");
  std::vector<uint8_t> bytes(values.size() * chorus_dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) sdk::StoreElement(bytes.data(), i, dtype, values[i]);
  return bytes;
}

double Combine(chorus_reduce_op op, double a, double b) {
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return a + b;
    case CHORUS_REDUCE_PROD:
      return a * b;
    case CHORUS_REDUCE_MIN:
      return std::min(a, b);
    case CHORUS_REDUCE_MAX:
      return std::max(a, b);
    default:
      throw std::invalid_argument("Combine: not a plugin reduce op");
  }
}

int64_t FirstDifference(chorus_dtype dtype, const std::vector<uint8_t>& a,
                        const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  if (a == b) return -1;
  const size_t element = chorus_dtype_size(dtype);
  for (size_t i = 0; i * element < a.size(); ++i) {
    if (std::memcmp(a.data() + i * element, b.data() + i * element, element) != 0) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

}  // namespace chorus::ring_grpc::test
