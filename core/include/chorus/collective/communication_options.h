// CommunicationOptions, as tf.distribute.experimental.CommunicationOptions: how collectives are
// packed and timed out, and which implementation runs them.
#ifndef CHORUS_COMMUNICATION_OPTIONS_H_
#define CHORUS_COMMUNICATION_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace chorus {

enum class CommunicationImplementation { kAuto, kRing, kNccl };

struct CommunicationOptions {
  // Gradients are packed into packs of at most this many bytes before the batch reduce; 0 puts
  // everything of one dtype into one pack. Unset: CHORUS_BYTES_PER_PACK, else 0.
  std::optional<int64_t> bytes_per_pack;
  // Seconds every collective may take before it fails with TIMEOUT. Unset:
  // CHORUS_TIMEOUT_SECONDS, else 300.
  std::optional<double> timeout_seconds;
  CommunicationImplementation implementation = CommunicationImplementation::kAuto;

  // tf.distribute's merge: fields set in `call` override those of `strategy` (the options given
  // to the strategy's constructor). Implementation: the call's unless it is AUTO.
  static CommunicationOptions Merge(const CommunicationOptions& strategy,
                                    const CommunicationOptions& call);
  // Fills unset fields from the environment, then the defaults. Throws Error naming a bad
  // variable.
  CommunicationOptions Resolved() const;
};

}  // namespace chorus

#endif  // CHORUS_COMMUNICATION_OPTIONS_H_
