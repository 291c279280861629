// The check before a communicator creates its collectives: every rank publishes what it is about
// to create (the collectives and why, the rules, the options each collective gets, the plugin
// that serves each, with its version and ABI) through the job's store, and the ranks compare
// with rank 0's. Ranks whose choices differ would never meet in their collectives' rendezvous
// and would each wait out the whole time-out; this way every rank fails at once with
// INVALID_ARGUMENT naming the difference, the two workers and what to change.
//
// Cost: rank r > 0 does one Set and one bounded Get (the verdict); rank 0 one Set, a bounded Get
// per other rank and one Set (the verdict). Rank 0 compares every rank with its own choices and
// publishes the first difference, or that all agree.
#ifndef CHORUS_CORE_COLLECTIVE_PLAN_CHECK_H_
#define CHORUS_CORE_COLLECTIVE_PLAN_CHECK_H_

#include <chorus/rendezvous/kv_store.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace chorus::internal {

// What one rank is about to create. Every field must be equal on every rank.
struct PlanChoices {
  int size = 0;             // ranks of the communicator
  std::string shape;        // JobShape::Describe(): what AUTO's scores looked at
  std::string request;      // "AUTO", "RING", "NCCL"
  std::string source;       // why the primary collective, shortened: "CHORUS_COMMUNICATION=gloo"
  std::string fixed;        // the collective that runs what no CHORUS_ALGORITHM rule routes
  std::string algorithm;    // CHORUS_ALGORITHM's rules, described ("" = none)
  std::string tuning;       // CHORUS_TUNING_FILE's rules for this job, described ("" = none)
  std::string tuning_from;  // "CHORUS_TUNING_FILE=/path [workers=2 hosts=1]"
  std::string autotune;     // "shm, core_ring, gloo; 5 samples" (CHORUS_AUTOTUNE=1), or ""
  struct Collective {
    std::string name;     // [0] is the primary one
    std::string plugin;   // "gloo 1.1.0 (Gloo 0.5.0), ABI 1.1"
    std::string options;  // the options its create gets: "algorithm=ring" ("" = none)
  };
  std::vector<Collective> collectives;
  // Set when this rank cannot say what it would create (a collective it lacks): its error.
  std::string error;

  std::string Serialize() const;
  // Throws Error(INTERNAL) for text Serialize did not write.
  static PlanChoices Parse(const std::string& text);
};

// The part of a plan's source that says why ("CHORUS_COMMUNICATION=gloo", "AUTO",
// "CommunicationOptions RING", "named core_ring"), without AUTO's ranking.
std::string ShortSource(const std::string& source);

// "" when `theirs` equals `reference`; else one sentence naming the first field that differs,
// both tasks with their values, and what to change: "worker 1 chose collective 'gloo'
// (CHORUS_COMMUNICATION=gloo) but worker 0 chose 'core_ring' (AUTO); give every worker the same
// CHORUS_COMMUNICATION".
std::string PlanMismatch(const PlanChoices& reference, const std::string& reference_task,
                         const PlanChoices& theirs, const std::string& their_task);

struct PlanExchange {
  KvStore* store = nullptr;
  std::string prefix;  // unique to this creation of this communicator, ends in '/'
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  double timeout_seconds = 0;                 // the same time-out, for messages
  std::function<std::string(int)> task_name;  // "worker 2"
  std::string what;                           // "communicator 'mwms'", starts each message
};

// Publishes `mine`, compares as described above and returns when every rank agrees. Throws
// Error: INVALID_ARGUMENT naming the first difference (on every rank that arrived), TIMEOUT
// naming the ranks that did not arrive within the time-out ("worker 2 did not join within 5 s").
// Ranks that arrive late within the time-out are waited for. A rank whose own choices carry an
// error returns once the others can learn it (rank 0 after publishing its verdict): the caller
// then throws that error.
void AgreeOnPlan(const PlanExchange& exchange, const PlanChoices& mine);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_COLLECTIVE_PLAN_CHECK_H_
