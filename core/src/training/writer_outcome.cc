#include "training/writer_outcome.h"

#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/distribute/strategy.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "base/logging.h"

namespace chorus::internal {
namespace {

constexpr int kWriterRank = 0;  // should_checkpoint's worker, the leader of BroadcastFromLeader
// Messages longer than this are cut (paths and errors are far shorter).
constexpr size_t kMaxText = 16384;

struct Outcome {
  chorus_status status = CHORUS_OK;
  std::string text;  // the result, or the error's message
};

// Every worker ends with the writer's outcome. Bytes travel as f32 (exact up to 2^24), the dtype
// every collective supports.
Outcome Broadcast(Communicator& communicator, const Outcome& mine) {
  const bool root = communicator.rank() == kWriterRank;
  const size_t length = root ? std::min(mine.text.size(), kMaxText) : 0;
  float header[2] = {static_cast<float>(mine.status), static_cast<float>(length)};
  communicator.Broadcast(header, 2, CHORUS_F32, kWriterRank);
  Outcome outcome{static_cast<chorus_status>(static_cast<int>(header[0])), {}};
  std::vector<float> text(static_cast<size_t>(header[1]));
  if (text.empty()) return outcome;
  if (root) {
    for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<unsigned char>(mine.text[i]);
  }
  communicator.Broadcast(text.data(), text.size(), CHORUS_F32, kWriterRank);
  outcome.text.reserve(text.size());
  for (float byte : text) outcome.text.push_back(static_cast<char>(static_cast<int>(byte)));
  return outcome;
}

}  // namespace

bool IsWriter(const Strategy* strategy) {
  return strategy == nullptr || strategy->should_checkpoint();
}

std::string RunOnWriter(Strategy* strategy, const std::string& what,
                        const std::function<std::string()>& work) {
  if (strategy == nullptr || strategy->num_workers() <= 1 || strategy->communicator() == nullptr) {
    return IsWriter(strategy) ? work() : std::string();
  }
  Communicator& communicator = *strategy->communicator();
  const std::string writer = communicator.TaskName(kWriterRank);
  Outcome mine;
  if (strategy->should_checkpoint()) {
    try {
      mine.text = work();
    } catch (const Error& e) {
      mine = {e.status(), e.what()};
    } catch (const std::exception& e) {
      mine = {CHORUS_INTERNAL, e.what()};
    }
  }
  const bool failed = mine.status != CHORUS_OK;
  const std::string writer_error = writer + " could not " + what + ": " + mine.text;
  // Logged at once as well: the others fail as soon as they hear, and a launcher that stops the
  // job at its first exit may stop the writer before its error reaches its own output.
  if (failed) Log().error("{}", writer_error);
  std::optional<Outcome> shared;
  try {
    shared = Broadcast(communicator, mine);
  } catch (...) {
    if (!failed) throw;
  }
  if (strategy->should_checkpoint()) {
    if (failed) throw Error(mine.status, writer_error);
    return mine.text;
  }
  if (shared->status != CHORUS_OK) {
    throw Error(shared->status,
                writer + " (the checkpoint writer) could not " + what + ": " + shared->text);
  }
  return shared->text;
}

}  // namespace chorus::internal
