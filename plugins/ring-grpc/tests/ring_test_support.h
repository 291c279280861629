// Helpers for the ring-grpc tests: the plugin loaded through the core's loader, rings of ranks
// as threads over one in-process store, and exact test data in every dtype.
#ifndef CHORUS_PLUGINS_RING_GRPC_TESTS_RING_TEST_SUPPORT_H_
#define CHORUS_PLUGINS_RING_GRPC_TESTS_RING_TEST_SUPPORT_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chorus::ring_grpc::test {

// The plugin's collective table (loaded once per process; the test fails when it cannot be).
const chorus_collective_api& Collective();
// The calling thread's last error in the plugin.
std::string LastError();

using Options = std::vector<std::pair<std::string, std::string>>;

struct CommunicatorDeleter {
  void operator()(chorus_communicator* comm) const;
};
using CommunicatorPtr = std::unique_ptr<chorus_communicator, CommunicatorDeleter>;

// A rendezvous store shared by the ranks of one ring (the core's in-process store).
class TestStore {
 public:
  TestStore();
  ~TestStore();
  const chorus_kv_store* get() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Creates rank `rank` of `size`; returns the status, with the communicator in *out.
chorus_status CreateCommunicator(int rank, int size, const TestStore& store, int64_t timeout_ms,
                                 const Options& options, CommunicatorPtr* out);

// Creates a ring of `size` ranks as threads (each creates its communicator, then runs
// body(rank, comm), then destroys it unless body already reset comm). Expects every create to
// succeed.
void RunRing(int size, int64_t timeout_ms, const Options& options,
             const std::function<void(int rank, CommunicatorPtr& comm)>& body);

// The dtypes the tests sweep: every one of plugin.h.

// `values` in `dtype`'s representation (values must be exact in it).
std::vector<uint8_t> Encode(chorus_dtype dtype, const std::vector<double>& values);

// Elementwise reduction of double values (exact small integers).
double Combine(chorus_reduce_op op, double a, double b);

// The index of the first element where two encoded buffers differ, or -1.
int64_t FirstDifference(chorus_dtype dtype, const std::vector<uint8_t>& a,
                        const std::vector<uint8_t>& b);

}  // namespace chorus::ring_grpc::test

#endif  // CHORUS_PLUGINS_RING_GRPC_TESTS_RING_TEST_SUPPORT_H_
