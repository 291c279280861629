#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <chorus/base/exit_status.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <string_view>
#include <thread>

#include "line_stream.h"
#include "spawn.h"

extern char** environ;

namespace chorus::launch {
namespace {

using Clock = std::chrono::steady_clock;
// How long workers get to exit after SIGTERM (or a forwarded signal) before SIGKILL.
constexpr auto kKillGrace = std::chrono::seconds(5);
// How long output may still arrive after the last worker exited, from processes it started.
constexpr auto kDrainGrace = std::chrono::seconds(1);
// After a worker failed, how long the others have to end on their own before SIGTERM: a
// collective's failure ends every worker within moments, each with its own message (the worker
// that caused it among them), which a SIGTERM at once would cut short.
constexpr auto kFailureGrace = std::chrono::seconds(1);

// Signal handlers only write the signal's number here; the main loop polls the other end.
int g_signal_pipe[2] = {-1, -1};

extern "C" void OnSignal(int signal) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] ssize_t written = write(g_signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

void Note(const std::string& text) { WriteAll(STDERR_FILENO, "chorus-launch: " + text + "\n"); }

// The job's secret for the workers' environment: a fresh random one per job, so only this job's
// processes get into its rendezvous store and transports (chorus's README, "Failures"). Empty
// when the user gave one (CHORUS_JOB_SECRET or CHORUS_JOB_SECRET_FILE), which the workers inherit.
std::string JobSecretVariable() {
  for (const char* name : {"CHORUS_JOB_SECRET", "CHORUS_JOB_SECRET_FILE"}) {
    const char* value = getenv(name);
    if (value != nullptr && *value != '\0') return "";
  }
  static const std::string variable = [] {
    unsigned char random[32];
    size_t filled = 0;
    while (filled < sizeof random) {
      const ssize_t n = getrandom(random + filled, sizeof random - filled, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        Note(std::string("cannot make a job secret (getrandom: ") + strerror(errno) +
             "); the job's rendezvous is open to any local process");
        return std::string();
      }
      filled += static_cast<size_t>(n);
    }
    static const char kHex[] = "0123456789abcdef";
    std::string text = "CHORUS_JOB_SECRET=";
    for (unsigned char byte : random) {
      text += kHex[byte >> 4];
      text += kHex[byte & 15];
    }
    return text;
  }();
  return variable;
}

std::string SignalName(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? std::string("SIG") + name : "signal " + std::to_string(signal);
}

bool InstallSignalHandlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaction(signal, &action, nullptr);
  // A reader of our output that goes away must not kill us while workers run.
  signal(SIGPIPE, SIG_IGN);
  return true;
}

struct Worker {
  std::string type;
  int index = 0;
  std::string name() const { return type + " " + std::to_string(index); }
  pid_t pid = -1;  // also its process group's id
  bool running = false;
  std::string exit_text;  // once it has exited: "worker 1 exited with code 3 (...)"
  bool failed = false;    // it exited with a code other than 0, or a signal ended it
  std::unique_ptr<LineStream> out;
  std::unique_ptr<LineStream> err;
};

class Supervisor {
 public:
  explicit Supervisor(const LaunchOptions& options) : options_(options) {}
  int Run();

 private:
  bool CreateDeathPipe();
  void StartAll();
  bool Start(Worker& worker);
  void Reap();
  void OnWorkerExit(Worker& worker, int status);
  void OnLaunchSignal(int signal);
  void Stop(int signal);
  void SignalGroups(int signal);
  // Handles the time-out, the SIGKILL after the grace, and the end of draining output; false
  // when the loop is done.
  bool CheckDeadlines();
  void PollOnce();
  void KillLeftovers();
  void OnChiefExit(int code, const std::string& how);
  bool AnyRunning() const;
  bool AnyStreamOpen() const;
  // --keep-going: each worker's exit status, then how many failed.
  void ReportEveryExit() const;
  // How messages name the processes: "workers" in a multi-worker job, "tasks" in a
  // parameter-server one.
  std::string tasks_word() const { return options_.parameter_server ? "tasks" : "workers"; }

  const LaunchOptions& options_;
  // The read end every worker inherits (CHORUS_LAUNCHER_FD); only we hold the write end, so when
  // we die, even from SIGKILL, every worker's chorus library reads end of file and stops it
  // (core/src/base/launcher_watch.h), also behind a wrapper script PDEATHSIG does not reach.
  int death_pipe_read_ = -1;
  int death_pipe_write_ = -1;
  std::vector<Worker> workers_;
  std::optional<int> exit_code_;  // set by the first failure, the time-out or a signal
  bool stopping_ = false;
  bool killed_all_ = false;
  // A parameter-server job: the chief has exited, and its exit code is the job's.
  bool chief_exited_ = false;
  std::optional<Clock::time_point> grace_until_;  // then the tasks still running are stopped
  // A worker failed: then the others still running are stopped (kFailureGrace).
  std::optional<Clock::time_point> failure_grace_until_;
  std::optional<Clock::time_point> timeout_at_;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> drain_until_;
  bool drain_killed_ = false;
};

int Supervisor::Run() {
  if (!InstallSignalHandlers()) {
    Note(std::string("cannot create a pipe: ") + strerror(errno));
    return 1;
  }
#ifdef __linux__
  // Orphans of the workers become our children, so that we reap them instead of leaving zombies.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
  if (!CreateDeathPipe()) {
    Note(std::string("cannot create a pipe: ") + strerror(errno));
    return 1;
  }
  if (options_.timeout_seconds) {
    timeout_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(*options_.timeout_seconds));
  }
  StartAll();
  for (;;) {
    Reap();
    if (!CheckDeadlines()) break;
    PollOnce();
  }
  KillLeftovers();
  if (options_.keep_going) ReportEveryExit();
  return exit_code_.value_or(0);
}

void Supervisor::ReportEveryExit() const {
  int failed = 0;
  for (const Worker& worker : workers_) {
    if (worker.pid < 0) {
      Note(worker.name() + " was not started");
    } else if (worker.exit_text.empty()) {
      Note(worker.name() + " did not exit (a process chorus-launch could not reap)");
    } else {
      Note(worker.exit_text);
    }
    failed += worker.pid < 0 || worker.failed ? 1 : 0;
  }
  if (failed > 0) {
    Note(std::to_string(failed) + " of " + std::to_string(workers_.size()) + " " + tasks_word() +
         " failed; exit code " + std::to_string(exit_code_.value_or(1)));
  }
}

bool Supervisor::CreateDeathPipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  death_pipe_write_ = fds[1];
  // Inherited across exec, and above stdin/stdout/stderr, which the child's dup2s overwrite.
  death_pipe_read_ = fcntl(fds[0], F_DUPFD, 3);
  close(fds[0]);
  return death_pipe_read_ >= 0;
}

void Supervisor::StartAll() {
  workers_.resize(options_.tasks.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].type = options_.tasks[i].type;
    workers_[i].index = options_.tasks[i].index;
    if (!Start(workers_[i])) {
      exit_code_ = 127;
      Stop(SIGTERM);
      return;
    }
  }
}

bool Supervisor::Start(Worker& worker) {
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    Note(std::string("cannot create a pipe: ") + strerror(errno));
    return false;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    Note(std::string("cannot create a pipe: ") + strerror(errno));
    close(out[0]);
    close(out[1]);
    return false;
  }
  // The worker's environment: ours, with its own TF_CONFIG and the job's secret.
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view name(*entry, strcspn(*entry, "="));
    if (name != "TF_CONFIG" && name != "CHORUS_LAUNCHER_FD" && name != "CHORUS_LAUNCHER_PID") {
      env_strings.emplace_back(*entry);
    }
  }
  env_strings.push_back(
      "TF_CONFIG=" + TaskTfConfig(options_.tasks, static_cast<size_t>(&worker - workers_.data())));
  if (const std::string secret = JobSecretVariable(); !secret.empty()) {
    env_strings.push_back(secret);
  }
  env_strings.push_back("CHORUS_LAUNCHER_FD=" + std::to_string(death_pipe_read_));
  env_strings.push_back("CHORUS_LAUNCHER_PID=" + std::to_string(getpid()));
  std::vector<char*> env;
  for (std::string& entry : env_strings) env.push_back(entry.data());
  env.push_back(nullptr);
  std::vector<std::string> arg_strings = options_.command;
  std::vector<char*> argv;
  for (std::string& arg : arg_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);

  int error = 0;
  const pid_t pid = SpawnWorker(argv.data(), env.data(), out[1], err[1], &error);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    Note("cannot start '" + options_.command[0] + "' for " + worker.name() + ": " +
         strerror(error));
    return false;
  }
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
  const std::string prefix = "[" + worker.name() + "] ";
  worker.pid = pid;
  worker.running = true;
  worker.out = std::make_unique<LineStream>(out[0], STDOUT_FILENO, prefix);
  worker.err = std::make_unique<LineStream>(err[0], STDERR_FILENO, prefix);
  return true;
}

void Supervisor::Reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    for (Worker& worker : workers_) {
      if (worker.pid == pid && worker.running) OnWorkerExit(worker, status);
    }
    // Any other pid was an orphan of a worker, adopted as subreaper: reaped, nothing more.
  }
}

void Supervisor::OnWorkerExit(Worker& worker, int status) {
  worker.running = false;
  const int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  std::string text = worker.name() + " exited with code " + std::to_string(code);
  if (WIFSIGNALED(status)) {
    text +=
        " (killed by " + SignalName(WTERMSIG(status)) + ": " + strsignal(WTERMSIG(status)) + ")";
  } else if (code == chorus::kWatchdogExitStatus) {
    text +=
        " (chorus's watchdog ended it: a call into a plugin did not return; its last "
        "\"[chorus watchdog]\" line says which)";
  }
  worker.exit_text = text;
  worker.failed = code != 0;
  if (options_.parameter_server) {
    if (stopping_) return;  // we stopped it; exit_code_ already says why
    if (worker.type == "chief") {
      OnChiefExit(code, text);
    } else if (code != 0) {
      // A parameter-server job outlives its workers: the chief's coordinator reschedules their
      // work, or gives up and exits, which ends the job.
      Note(worker.name() +
           (WIFSIGNALED(status) ? " died (signal " + std::to_string(WTERMSIG(status)) + ", " +
                                      SignalName(WTERMSIG(status)) + ")"
                                : " exited with code " + std::to_string(code)) +
           "; the chief decides what happens");
    }
    return;
  }
  if (code == 0 || stopping_) return;
  if (options_.keep_going) {
    // The others go on; the first failure's code is the job's.
    if (!exit_code_) exit_code_ = code;
    Note(text + (AnyRunning() ? "; the others go on (--keep-going)" : ""));
    return;
  }
  if (failure_grace_until_) {
    Note(text);  // another failure while the first one's grace runs
    return;
  }
  Note(text + (AnyRunning() ? "; stopping the others" : ""));
  exit_code_ = code;
  if (AnyRunning()) failure_grace_until_ = Clock::now() + kFailureGrace;
}

void Supervisor::OnChiefExit(int code, const std::string& how) {
  chief_exited_ = true;
  exit_code_ = code;
  if (!AnyRunning()) return;
  if (code != 0) {
    // A failed chief tells no one to shut down: waiting for the others would be in vain.
    Note(how + "; stopping the others");
    Stop(SIGTERM);
    return;
  }
  // The chief normally tells the workers and ps tasks to shut down; they get time to do so.
  grace_until_ = Clock::now() + std::chrono::seconds(kChiefGraceSeconds);
}

void Supervisor::OnLaunchSignal(int signal) {
  if (!stopping_) {
    Note("got " + SignalName(signal) + "; passing it to the " + tasks_word());
    if (!chief_exited_) exit_code_ = 128 + signal;
    Stop(signal);
  } else if (!killed_all_) {
    Note("got " + SignalName(signal) + " while stopping; killing the " + tasks_word());
    SignalGroups(SIGKILL);
  }
}

void Supervisor::Stop(int signal) {
  stopping_ = true;
  SignalGroups(signal);
  // A stopped worker (SIGSTOP, SIGTSTP) would hold the signal pending until the grace ran out:
  // continue it, so that it acts on it now.
  SignalGroups(SIGCONT);
  kill_at_ = Clock::now() + kKillGrace;
}

void Supervisor::SignalGroups(int signal) {
  if (signal == SIGKILL) killed_all_ = true;
  // Exited workers' groups too: what they started may still run.
  for (const Worker& worker : workers_) {
    if (worker.pid > 0) kill(-worker.pid, signal);
  }
}

bool Supervisor::CheckDeadlines() {
  const Clock::time_point now = Clock::now();
  if (timeout_at_ && now >= *timeout_at_) {
    timeout_at_.reset();
    if (!stopping_) {
      std::ostringstream seconds;
      seconds << *options_.timeout_seconds;
      Note("timed out after " + seconds.str() + " s; stopping the " + tasks_word());
      if (!chief_exited_) exit_code_ = 124;
      Stop(SIGTERM);
    }
  }
  if (failure_grace_until_ && (now >= *failure_grace_until_ || !AnyRunning())) {
    failure_grace_until_.reset();
    if (AnyRunning() && !stopping_) Stop(SIGTERM);
  }
  if (grace_until_ && now >= *grace_until_) {
    grace_until_.reset();
    if (AnyRunning() && !stopping_) {
      Note("tasks still running " + std::to_string(kChiefGraceSeconds) +
           " s after the chief exited; stopping them");
      Stop(SIGTERM);
    }
  }
  if (kill_at_ && now >= *kill_at_) {
    kill_at_.reset();
    if (AnyRunning() && !killed_all_) {
      Note(tasks_word() + " still running " + std::to_string(kKillGrace.count()) +
           " s after they were asked to stop; killing them");
      SignalGroups(SIGKILL);
    }
  }
  if (AnyRunning()) return true;
  if (!AnyStreamOpen()) return false;
  // Every worker has exited but something they started still holds their output open.
  if (!drain_until_) {
    drain_until_ = now + kDrainGrace;
  } else if (now >= *drain_until_) {
    if (drain_killed_) return false;
    if (!killed_all_) {
      Note("killing processes the " + tasks_word() + " left behind, which hold their output");
    }
    SignalGroups(SIGKILL);
    drain_killed_ = true;
    drain_until_ = now + kDrainGrace;
  }
  return true;
}

void Supervisor::PollOnce() {
  std::vector<pollfd> fds = {{g_signal_pipe[0], POLLIN, 0}};
  std::vector<LineStream*> streams;
  for (Worker& worker : workers_) {
    for (LineStream* stream : {worker.out.get(), worker.err.get()}) {
      if (stream && stream->open()) {
        fds.push_back({stream->fd(), POLLIN, 0});
        streams.push_back(stream);
      }
    }
  }
  Clock::time_point wake = Clock::now() + std::chrono::seconds(1);
  for (const auto& deadline :
       {timeout_at_, kill_at_, drain_until_, grace_until_, failure_grace_until_}) {
    if (deadline && *deadline < wake) wake = *deadline;
  }
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - Clock::now());
  const int ready = poll(fds.data(), fds.size(), std::max<int>(0, static_cast<int>(wait.count())));
  if (ready <= 0) return;  // time-out, or EINTR: the loop looks again
  if (fds[0].revents & POLLIN) {
    unsigned char signals[64];
    ssize_t n;
    while ((n = read(g_signal_pipe[0], signals, sizeof(signals))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (signals[i] != SIGCHLD) OnLaunchSignal(signals[i]);
      }
    }
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    if (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) streams[i]->ReadAvailable();
  }
}

void Supervisor::KillLeftovers() {
  for (Worker& worker : workers_) {
    if (worker.out) worker.out->Close();
    if (worker.err) worker.err->Close();
  }
  // A process that is exiting (it closed its output, but is not yet a zombie we can reap) still
  // counts as a member of its group: give such processes a moment, reaping, before calling
  // anything left behind.
  const Clock::time_point settle_until = Clock::now() + std::chrono::milliseconds(250);
  for (;;) {
    Reap();
    bool any_group = false;
    for (const Worker& worker : workers_) {
      any_group = any_group || (worker.pid > 0 && kill(-worker.pid, 0) == 0);
    }
    if (!any_group || Clock::now() >= settle_until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (Worker& worker : workers_) {
    if (worker.pid <= 0 || kill(-worker.pid, 0) != 0) continue;
    if (!killed_all_) {
      Note("killing the processes " + worker.name() + " left behind");
    }
    kill(-worker.pid, SIGKILL);
  }
  // Reap what we adopted (and what we just killed), for at most a second.
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < give_up) {
    const pid_t pid = waitpid(-1, nullptr, WNOHANG);
    if (pid < 0 && errno != EINTR) return;  // ECHILD: nothing left
    if (pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool Supervisor::AnyRunning() const {
  for (const Worker& worker : workers_) {
    if (worker.running) return true;
  }
  return false;
}

bool Supervisor::AnyStreamOpen() const {
  for (const Worker& worker : workers_) {
    if ((worker.out && worker.out->open()) || (worker.err && worker.err->open())) return true;
  }
  return false;
}

}  // namespace

void AddTasks(const std::string& type, int count, const std::vector<int>& ports, size_t first,
              std::vector<LaunchTask>* tasks) {
  for (int i = 0; i < count; ++i) tasks->push_back({type, i, ports.at(first + i)});
}

std::string TaskTfConfig(const std::vector<LaunchTask>& tasks, size_t i) {
  std::vector<std::string> jobs;  // in order of first appearance
  std::map<std::string, std::string> addresses;
  for (const LaunchTask& task : tasks) {
    std::string& list = addresses[task.type];
    if (list.empty()) jobs.push_back(task.type);
    list += (list.empty() ? "\"127.0.0.1:" : ",\"127.0.0.1:") + std::to_string(task.port) + "\"";
  }
  std::string cluster;
  for (const std::string& job : jobs) {
    cluster += (cluster.empty() ? "\"" : ",\"") + job + "\":[" + addresses[job] + "]";
  }
  return "{\"cluster\":{" + cluster + "},\"task\":{\"type\":\"" + tasks[i].type +
         "\",\"index\":" + std::to_string(tasks[i].index) + "}}";
}

int RunTasks(const LaunchOptions& options) { return Supervisor(options).Run(); }

}  // namespace chorus::launch
