// What each rank saw of its TCP pairs while Gloo connected them, and the verdict every rank draws
// from all the ranks' reports alike.
//
// Why: Gloo (this version) gives every pair its own listening socket and takes the first
// connection that socket accepts for the peer, with no way to tell the peer from any other
// process that connects first. The ranks' connections are checked against each other instead:
// the end a rank accepted must be the end its peer connected from.
#ifndef CHORUS_PLUGINS_GLOO_MESH_REPORT_H_
#define CHORUS_PLUGINS_GLOO_MESH_REPORT_H_

#include <sys/socket.h>

#include <optional>
#include <string>
#include <vector>

namespace chorus::gloo_plugin {

// "127.0.0.1:40000" or "[::1]:40000" (Gloo's own Address::str() prints the port in network
// byte order).
std::string AddressText(const sockaddr_storage& address);

// One rank's side of its pair with one peer, after it asked Gloo to connect the pair.
struct PairReport {
  bool listens = false;   // Gloo's accepting side of this pair (the other side connects to it)
  std::string listening;  // the address this side published (its pair's listening socket)
  std::string local;      // this end of the connection, once connected
  std::string remote;     // the other end, as Gloo saw it, once connected or accepted
  // What Gloo had taken on this pair before this rank connected it, where that cannot be the
  // peer: "a connection from 127.0.0.1:5555" (connect.cc, BeforeConnect).
  std::string early;
  std::string error;  // what Gloo threw while connecting the pair, as Gloo words it
  // The local address of a connection made only to release the peer's listener (after this
  // side's own connection was lost to an outsider); that listener then accepts it.
  std::string released_with;
};

// One rank's reports, indexed by peer rank (its own entry is unused).
using RankReport = std::vector<PairReport>;

std::string EncodeReport(const RankReport& report);
// nullopt for text EncodeReport did not write, or with another count of pairs.
std::optional<RankReport> DecodeReport(const std::string& text, int size);

struct MeshVerdict {
  enum class Outcome {
    kConnected,  // every pair joins the two ranks it is meant to
    kIntruder,   // a process that is not a rank connected to a listener: set up again
    kFailed,     // a pair failed for another reason: `error`, on `rank`'s side of its pair with
                 // `peer`: Gloo's own words when `from_gloo`
  };
  Outcome outcome = Outcome::kConnected;
  // kIntruder: what it did, naming the addresses ("rank 1's listener at 127.0.0.1:40123, meant
  // for rank 2, accepted a connection from 127.0.0.1:55012, ..."); the first found, in rank
  // order.
  std::string intruder;
  int rank = -1;
  int peer = -1;
  std::string error;
  bool from_gloo = false;
};

// `reports[r]` is rank r's report. Every rank gets the same verdict from the same reports.
MeshVerdict JudgeMesh(const std::vector<RankReport>& reports);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_MESH_REPORT_H_
