// The file work of a save (a checkpoint, an index, an owner record) is done by one worker, the
// writer; with several workers its outcome is made every worker's, so that a failed save stops
// the whole job at once instead of leaving the others waiting in the next collective.
#ifndef CHORUS_CORE_SRC_TRAINING_WRITER_OUTCOME_H_
#define CHORUS_CORE_SRC_TRAINING_WRITER_OUTCOME_H_

#include <functional>
#include <string>

namespace chorus {

class Strategy;

namespace internal {

// Whether this process writes files for `strategy`: with no strategy it does; otherwise when
// the strategy's should_checkpoint() is true (worker 0 of several).
bool IsWriter(const Strategy* strategy);

// Runs `work` on the writer. With several workers every worker then joins a broadcast from the
// writer (worker 0) of its outcome and its text: work's result, or its error's message. So
//   - the writer returns work's result, or logs (at once, before the broadcast) and throws its
//     error (its status), prefixed "worker 0 could not <what>: ";
//   - every other worker returns the writer's result, or throws Error (the writer's status)
//     "worker 0 (the checkpoint writer) could not <what>: <the writer's message>".
// With one worker (or none) `work` runs and its errors pass unchanged. A broadcast that fails (a
// worker died) throws the communicator's error, except on a writer whose work failed: its own
// error comes first.
std::string RunOnWriter(Strategy* strategy, const std::string& what,
                        const std::function<std::string()>& work);

}  // namespace internal
}  // namespace chorus

#endif  // CHORUS_CORE_SRC_TRAINING_WRITER_OUTCOME_H_
