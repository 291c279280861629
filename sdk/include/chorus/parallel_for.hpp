// ParallelFor: a loop whose iterations are shared among threads, for a plugin that does its own
// work on host memory (a fused reduce over chunks of a buffer, say). Header-only, C++17.
#ifndef CHORUS_SDK_PARALLEL_FOR_HPP_
#define CHORUS_SDK_PARALLEL_FOR_HPP_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace chorus::sdk {

// Calls body(i) once for every i in [0, count), on at most `threads` threads (the calling thread
// among them; 0 or 1: the calling thread alone), each taking the next i in turn. The first
// exception a call throws stops the threads taking more and is rethrown here; every thread started
// has been joined by then, as it has when ParallelFor returns. A thread that cannot be started
// leaves its share to the others.
template <typename Body>
void ParallelFor(size_t count, unsigned threads, Body&& body) {
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;  // the first failure
  const auto work = [&] {
    try {
      for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) body(i);
    } catch (...) {
      next.store(count);
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  const size_t wanted = threads > 1 && count > 1 ? std::min<size_t>(threads, count) - 1 : 0;
  helpers.reserve(wanted);
  for (size_t t = 0; t < wanted; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& helper : helpers) helper.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace chorus::sdk

#endif  // CHORUS_SDK_PARALLEL_FOR_HPP_
