#include "peer_process.h"

#include <unistd.h>

#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <fstream>
#include <sstream>

namespace chorus::ucx {
namespace {

// State and start time of /proc/<pid>/stat; false when the file is gone.
bool ReadStat(int64_t pid, char* state, uint64_t* start_time) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!file || !std::getline(file, line)) return false;
  const size_t name_end = line.rfind(')');  // the command name may hold spaces and parentheses
  if (name_end == std::string::npos) return false;
  std::istringstream fields(line.substr(name_end + 1));
  std::string field;
  fields >> *state;  // field 3
  for (int index = 4; index < 22 && fields >> field; ++index) {
  }
  return static_cast<bool>(fields >> *start_time);  // field 22
}

std::string FirstLine(const char* path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

void PutU64(std::string& out, uint64_t value) {
  char bytes[8];
  std::memcpy(bytes, &value, sizeof bytes);
  out.append(bytes, sizeof bytes);
}

uint64_t GetU64(std::string_view& in) {
  uint64_t value = 0;
  std::memcpy(&value, in.data(), sizeof value);
  in.remove_prefix(sizeof value);
  return value;
}

}  // namespace

ProcessIdentity ThisProcess() {
  ProcessIdentity self;
  self.pid = static_cast<int64_t>(getpid());
  char state = 0;
  ReadStat(self.pid, &state, &self.start_time);
  char ns[128] = {};
  const ssize_t length = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  self.host = FirstLine("/proc/sys/kernel/random/boot_id") + "/" +
              (length > 0 ? std::string(ns, static_cast<size_t>(length)) : std::string("?"));
  return self;
}

bool ProcessAlive(const ProcessIdentity& process) {
  char state = 0;
  uint64_t start_time = 0;
  if (!ReadStat(process.pid, &state, &start_time)) return false;
  return state != 'Z' && state != 'X' && start_time == process.start_time;
}

std::string EncodeRecord(const PeerRecord& record) {
  std::string out;
  PutU64(out, static_cast<uint64_t>(record.process.pid));
  PutU64(out, record.process.start_time);
  PutU64(out, record.process.host.size());
  out += record.process.host;
  PutU64(out, record.host_id.size());
  out += record.host_id;
  out += record.worker_address;
  return out;
}

PeerRecord DecodeRecord(std::string_view bytes, int rank) {
  PeerRecord record;
  if (bytes.size() < 24) {
    sdk::Fail(CHORUS_INTERNAL, "ucx: the store's entry of rank ", rank, " is ", bytes.size(),
              " bytes, too short (another version of the ucx plugin on that rank?)");
  }
  record.process.pid = static_cast<int64_t>(GetU64(bytes));
  record.process.start_time = GetU64(bytes);
  const uint64_t host_length = GetU64(bytes);
  if (host_length >= bytes.size()) {
    sdk::Fail(CHORUS_INTERNAL, "ucx: the store's entry of rank ", rank, " is damaged");
  }
  record.process.host = std::string(bytes.substr(0, host_length));
  bytes.remove_prefix(host_length);
  if (bytes.size() < 8) {
    sdk::Fail(CHORUS_INTERNAL, "ucx: the store's entry of rank ", rank, " is damaged");
  }
  const uint64_t host_id_length = GetU64(bytes);
  if (host_id_length >= bytes.size()) {
    sdk::Fail(CHORUS_INTERNAL, "ucx: the store's entry of rank ", rank, " is damaged");
  }
  record.host_id = std::string(bytes.substr(0, host_id_length));
  bytes.remove_prefix(host_id_length);
  record.worker_address = std::string(bytes);
  return record;
}

}  // namespace chorus::ucx
