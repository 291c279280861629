// Rendezvous stores that cross processes: a TCP store served by the leader (worker 0 or the
// chief) that every worker connects to, and a file store in a shared directory.
#ifndef CHORUS_RENDEZVOUS_H_
#define CHORUS_RENDEZVOUS_H_

#include <chorus/rendezvous/kv_store.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace chorus {

// Serves a KvStore over TCP on host:port (port 0 = any free port) from a background thread.
//
// The store outlives every member of the job: when destroyed, the server goes on serving until
// every client of another process has closed its connection (left, or died) or `linger` has
// passed, and only then closes every connection. So the member that serves the store (the
// leader) can finish first while the others still read what it wrote. Connections this process
// holds itself do not hold it. With `other_members` > 0 it also waits until that many distinct
// names from other processes have said hello (AnnounceTcpStoreClient): a member that has not
// connected yet when the leader is done still finds the store. A server that gives up after
// `linger` logs who was still there or never came.
class TcpStoreServer {
 public:
  static constexpr std::chrono::milliseconds kDefaultLinger{60000};
  static std::unique_ptr<TcpStoreServer> Start(const std::string& host, uint16_t port,
                                               std::chrono::milliseconds linger = kDefaultLinger,
                                               int other_members = 0);
  virtual ~TcpStoreServer() = default;
  virtual uint16_t port() const = 0;
  // Stops waiting for the member that said hello as `name` when destroyed: its connections no
  // longer hold the server, and it counts as come. For a member known to be stopped or hung
  // (JobHealth tells the leader's server), whose open connections would otherwise keep the
  // leader for the whole linger. Safe from any thread.
  virtual void StopWaitingFor(const std::string& name) = 0;
};

// Connects to a TcpStoreServer, retrying until `timeout` (the leader may start later). Throws
// Error(CHORUS_TIMEOUT) naming the address when it cannot connect in time. Operations on a
// connection the server closed throw Error(CHORUS_PEER_LOST) naming the address.
// The store keeps one connection and sends one request at a time, so a thread blocked in Get
// holds up the others using the same store object (connect again for a second lane). Requests
// that do not wait (Set, Add, Check, Remove) fail with PEER_LOST when the server has not answered
// in 60 s; a Get or Wait gets its own time-out plus 2 s. Destroying the store says goodbye to the
// server (see AnnounceTcpStoreClient).
std::shared_ptr<KvStore> ConnectTcpStore(const std::string& host, uint16_t port,
                                         std::chrono::milliseconds timeout);

// Names this client to the server (e.g. "worker 2") for the health check: when its connection
// closes without the goodbye that destroying the store sends (the process died), and no other
// connection of that name is open, the server sets "chorus/lost/<name>" = "1" and appends the
// name to "chorus/lost" (a comma list), which every other client can wait on. Throws
// Error(CHORUS_INVALID_ARGUMENT) when `store` is not a store ConnectTcpStore returned (a WithPrefix
// view of one is not).
void AnnounceTcpStoreClient(KvStore& store, const std::string& name);

// Leaves the store now: says goodbye and closes the connection, as destroying the store does;
// later operations on it throw Error(CHORUS_PEER_LOST) saying this process left. For a member
// whose store object is still held by something it cannot destroy first, so that the leader's
// server need not wait for it. Throws Error(CHORUS_INVALID_ARGUMENT) for a store ConnectTcpStore
// did not return; leaving twice does nothing.
void LeaveTcpStore(KvStore& store);

// Gives the store up from any thread, even while another thread waits in it: that wait and every
// later operation throw Error(CHORUS_PEER_LOST) with `reason` at once. For a leader known to be
// dead or stopped (JobHealth), so that nothing of this process (a plugin's goodbye in the store,
// say) waits for a store that will not answer; and for a start-up that cannot finish (a worker
// died), so that no wait of it lasts until its time-out. Throws Error(CHORUS_INVALID_ARGUMENT) for
// a store ConnectTcpStore did not return.
void AbandonTcpStore(KvStore& store, const std::string& reason);

// A store kept as files in `directory` (created if missing), which every worker must see (a
// shared file system). Writes are atomic (write, then rename); waits poll.
std::shared_ptr<KvStore> MakeFileStore(const std::string& directory);

}  // namespace chorus

#endif  // CHORUS_RENDEZVOUS_H_
