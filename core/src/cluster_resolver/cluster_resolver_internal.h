// Helpers shared by the cluster resolvers: reading launcher variables with errors that name them.
#ifndef CHORUS_CORE_CLUSTER_RESOLVER_INTERNAL_H_
#define CHORUS_CORE_CLUSTER_RESOLVER_INTERNAL_H_

#include <chorus/cluster_resolver/cluster_resolver.h>

#include <cstddef>
#include <optional>
#include <string>

namespace chorus::cluster_internal {

// The integer in variable `name`, which `resolver` (e.g. "SlurmClusterResolver") needs. Throws
// Error(INVALID_ARGUMENT) naming the variable when it is unset, not an integer, or not in
// [min, max].
long long RequiredEnvInteger(const char* name, long long min, long long max,
                             const std::string& resolver);

// As RequiredEnvInteger, but `fallback` when the variable is unset or empty.
long long OptionalEnvInteger(const char* name, long long fallback, long long min, long long max,
                             const std::string& resolver);

// Throws Error(INVALID_ARGUMENT, message): the one way the resolvers report bad input.
[[noreturn]] void Fail(const std::string& message);

// Parses a decimal integer with nothing around it; false when `text` is not one or overflows.
bool ParseInteger(const std::string& text, long long* value);

// The number of tasks of `job` in `spec` (0 when it has none).
int JobSize(const ClusterSpec& spec, const std::string& job);

// Whether `type` is one of TensorFlow's task types: chief, worker, ps, evaluator.
bool IsTaskType(const std::string& type);

// The smallest index in 0..largest that `tasks` lacks; nullopt when its indices are 0..n-1.
std::optional<int> FirstGap(const SparseClusterSpec::TaskMap& tasks);

// The indices of `tasks` for a message, runs shortened: "0..2, 5, 7, 8" ("none" for no tasks).
std::string IndexList(const SparseClusterSpec::TaskMap& tasks);

// How a job of `num_tasks` tasks with a gap is fixed, for a message: "number its tasks 0..2 or
// add the missing ones".
std::string GapFix(size_t num_tasks);

}  // namespace chorus::cluster_internal

#endif  // CHORUS_CORE_CLUSTER_RESOLVER_INTERNAL_H_
