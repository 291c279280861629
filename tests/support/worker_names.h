// How the core's checks name a rank in the tests' jobs (no chief): "worker <rank>", as the
// cluster resolver names a task.
#pragma once

#include <string>

namespace chorus::test {

inline std::string WorkerName(int rank) { return "worker " + std::to_string(rank); }

}  // namespace chorus::test
