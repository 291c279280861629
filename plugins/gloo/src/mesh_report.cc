#include "mesh_report.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chorus/plugin_sdk.hpp>

#include "gloo_errors.h"

namespace chorus::gloo_plugin {
namespace {

std::string Rank(int rank) { return "rank " + std::to_string(rank); }

// "rank 1's listener at 127.0.0.1:40123, meant for rank 2,"
std::string Listener(int rank, int peer, const PairReport& side) {
  return Rank(rank) + "'s listener at " + side.listening + ", meant for " + Rank(peer) + ",";
}

// Where the peer `rank` connected from, for a message.
std::string ConnectsFrom(int rank, const PairReport& side) {
  if (!side.local.empty()) return Rank(rank) + " connected from " + side.local;
  if (!side.error.empty()) {
    return Rank(rank) + " could not connect (Gloo: " + WithHostOrderPorts(side.error) + ")";
  }
  return Rank(rank) + " did not connect";
}

// What shows that a process other than `peer` reached `rank`'s side of their pair ("" if
// nothing does).
std::string IntruderSeenBy(int rank, int peer, const PairReport& mine, const PairReport& theirs) {
  if (!mine.early.empty()) {
    return Listener(rank, peer, mine) + " had accepted " + mine.early + " before " + Rank(rank) +
           " connected the pair";
  }
  if (mine.listens && !mine.remote.empty() && mine.remote != theirs.local &&
      mine.remote != theirs.released_with) {
    return Listener(rank, peer, mine) + " accepted a connection from " + mine.remote + ", but " +
           ConnectsFrom(peer, theirs);
  }
  return "";
}

// A connection the listening side lost before any operation: the peer keeps its own open, so the
// lost one was another process's ("" if there is none).
std::string LostByListener(int rank, int peer, const PairReport& mine, const PairReport& theirs) {
  if (!mine.listens || mine.error.empty() || StatusOfGlooMessage(mine.error) != CHORUS_PEER_LOST) {
    return "";
  }
  return Listener(rank, peer, mine) +
         " accepted a connection that then closed (Gloo: " + WithHostOrderPorts(mine.error) +
         "), and " + ConnectsFrom(peer, theirs);
}

}  // namespace

std::string AddressText(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    ::inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in.sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6.sin6_port));
  }
  return "(an address of family " + std::to_string(address.ss_family) + ")";
}

std::string EncodeReport(const RankReport& report) {
  std::string out;
  sdk::PutField(out, std::to_string(report.size()));
  for (const PairReport& pair : report) {
    sdk::PutField(out, pair.listens ? "1" : "0");
    sdk::PutField(out, pair.listening);
    sdk::PutField(out, pair.local);
    sdk::PutField(out, pair.remote);
    sdk::PutField(out, pair.early);
    sdk::PutField(out, pair.error);
    sdk::PutField(out, pair.released_with);
  }
  return out;
}

std::optional<RankReport> DecodeReport(const std::string& text, int size) {
  sdk::FieldReader in(text);
  const auto count = in.Next();
  if (!count || *count != std::to_string(size)) return std::nullopt;
  RankReport report(static_cast<size_t>(size));
  for (PairReport& pair : report) {
    std::optional<std::string> fields[7];
    for (auto& field : fields) {
      field = in.Next();
      if (!field) return std::nullopt;
    }
    pair.listens = *fields[0] == "1";
    pair.listening = *fields[1];
    pair.local = *fields[2];
    pair.remote = *fields[3];
    pair.early = *fields[4];
    pair.error = *fields[5];
    pair.released_with = *fields[6];
  }
  if (!in.AtEnd()) return std::nullopt;
  return report;
}

MeshVerdict JudgeMesh(const std::vector<RankReport>& reports) {
  const int size = static_cast<int>(reports.size());
  MeshVerdict verdict;
  // An outsider first: the errors it caused (a refused connection, a closed one) follow from it.
  // What names its address comes before a lost connection, which may be one this plugin made to
  // release a listener (PairReport::released_with).
  for (auto* evidence : {&IntruderSeenBy, &LostByListener}) {
    for (int rank = 0; rank < size; ++rank) {
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        const std::string seen = (*evidence)(rank, peer, reports[rank][peer], reports[peer][rank]);
        if (!seen.empty()) {
          verdict.outcome = MeshVerdict::Outcome::kIntruder;
          verdict.intruder = seen;
          return verdict;
        }
      }
    }
  }
  for (int rank = 0; rank < size; ++rank) {
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const PairReport& mine = reports[rank][peer];
      const PairReport& theirs = reports[peer][rank];
      if (mine.error.empty() && mine.remote == theirs.local) continue;
      verdict.outcome = MeshVerdict::Outcome::kFailed;
      verdict.rank = rank;
      verdict.peer = peer;
      verdict.from_gloo = !mine.error.empty();
      verdict.error = verdict.from_gloo
                          ? mine.error
                          : "its connection reaches " + mine.remote + ", but " +
                                ConnectsFrom(peer, theirs) + " (the pair's two ends do not match)";
      return verdict;
    }
  }
  return verdict;
}

}  // namespace chorus::gloo_plugin
