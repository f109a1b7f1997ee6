#include "cli/local_train.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

namespace mle::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::atomic<int> g_signal{0};

void OnSignal(int sig) { g_signal.store(sig); }

bool PortIsFree(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

std::string JoinPythonPath(const std::string& ours) {
  const char* existing = std::getenv("PYTHONPATH");
  if (ours.empty()) return existing ? existing : "";
  if (existing == nullptr || *existing == '\0') return ours;
  return absl::StrCat(ours, ":", existing);
}

// One running task and its partial output lines.
struct Running {
  LocalTask task;
  std::optional<common::Subprocess> child;
  std::string out_buf;
  std::string err_buf;
  bool stopped_by_us = false;
};

void EmitLines(const std::string& name, std::string& buf, std::FILE* to, bool flush_partial) {
  size_t start = 0;
  while (true) {
    size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    std::fprintf(to, "%s: %.*s\n", name.c_str(), static_cast<int>(nl - start), buf.data() + start);
    start = nl + 1;
  }
  buf.erase(0, start);
  if (flush_partial && !buf.empty()) {
    std::fprintf(to, "%s: %s\n", name.c_str(), buf.c_str());
    buf.clear();
  }
  std::fflush(to);
}

// Reads whatever is ready on the tasks' pipes (waiting up to timeout_ms).
void PumpOutput(std::vector<Running>& tasks, int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, bool>> owners;  // task index, is_stderr
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!tasks[i].child) continue;
    if (tasks[i].child->stdout_fd() >= 0) {
      fds.push_back({tasks[i].child->stdout_fd(), POLLIN, 0});
      owners.emplace_back(i, false);
    }
    if (tasks[i].child->stderr_fd() >= 0) {
      fds.push_back({tasks[i].child->stderr_fd(), POLLIN, 0});
      owners.emplace_back(i, true);
    }
  }
  if (fds.empty()) {
    ::usleep(static_cast<useconds_t>(timeout_ms) * 1000);
    return;
  }
  int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n <= 0) return;
  char buf[16384];
  for (size_t k = 0; k < fds.size(); ++k) {
    if (fds[k].revents == 0) continue;
    auto [i, is_err] = owners[k];
    Running& r = tasks[i];
    ssize_t got = ::read(fds[k].fd, buf, sizeof(buf));
    std::string& line_buf = is_err ? r.err_buf : r.out_buf;
    std::FILE* to = is_err ? stderr : stdout;
    if (got > 0) {
      line_buf.append(buf, static_cast<size_t>(got));
      EmitLines(r.task.name, line_buf, to, false);
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
      EmitLines(r.task.name, line_buf, to, true);
      if (is_err) {
        r.child->CloseStderr();
      } else {
        r.child->CloseStdout();
      }
    }
  }
}

bool PipesOpen(const Running& r) { return r.child && (r.child->stdout_fd() >= 0 || r.child->stderr_fd() >= 0); }

int RunSingle(const LocalTask& task, const std::string& cwd) {
  common::SpawnOptions options;
  options.argv = task.argv;
  options.cwd = cwd;
  options.env = common::CurrentEnvironmentWith(task.env);
  // The trainer shares our terminal (stdin too) and process group: Ctrl-C
  // reaches it directly; we wait for it to finish.
  options.in = common::Stdio::Inherit();
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_int {}, old_quit {};
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);
  auto child = common::Spawn(options);
  int code;
  if (!child.ok()) {
    std::fprintf(stderr, "ERROR: %s\n", std::string(child.status().message()).c_str());
    code = 1;
  } else {
    code = child->Wait();
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  return code;
}

}  // namespace

std::vector<LocalTask> PlanLocalTasks(const LocalTrainOptions& o, const std::vector<int>& ports) {
  std::vector<std::string> args = o.user_args;
  if (o.job_dir) {
    args.push_back("--job-dir");
    args.push_back(*o.job_dir);
  }
  std::vector<std::string> argv = {o.python, "-m", o.module_name};
  argv.insert(argv.end(), args.begin(), args.end());
  const json job = {{"job_name", o.module_name}, {"args", args}};
  const std::string pythonpath = JoinPythonPath(o.mlengine_pythonpath);

  auto base_env = [&](const std::string& name) {
    std::map<std::string, std::string> env;
    env["MLENGINE_TASK_NAME"] = name;
    if (!pythonpath.empty()) env["PYTHONPATH"] = pythonpath;
    env["PYTHONUNBUFFERED"] = "1";
    return env;
  };

  std::vector<LocalTask> tasks;
  if (!o.distributed) {
    LocalTask t;
    t.name = "master-replica-0";
    t.argv = argv;
    t.env = base_env(t.name);
    t.env["TF_CONFIG"] = json{{"job", job}, {"task", json::object()}, {"cluster", json::object()},
                              {"environment", "cloud"}}.dump();
    t.env["MASTER_ADDR"] = "localhost";
    t.env["MASTER_PORT"] = ports.empty() ? "0" : std::to_string(ports.back());
    t.env["WORLD_SIZE"] = "1";
    t.env["RANK"] = "0";
    tasks.push_back(std::move(t));
    return tasks;
  }

  const int ps = o.parameter_server_count;
  const int workers = o.worker_count;
  auto address = [&](int i) { return absl::StrCat("localhost:", ports[static_cast<size_t>(i)]); };
  json cluster = {{"chief", json::array({address(0)})}, {"ps", json::array()}, {"worker", json::array()}};
  for (int i = 0; i < ps; ++i) cluster["ps"].push_back(address(1 + i));
  for (int i = 0; i < workers; ++i) cluster["worker"].push_back(address(1 + ps + i));
  const std::string torch_port = std::to_string(ports[static_cast<size_t>(1 + ps + workers)]);

  auto add = [&](const std::string& type, int index, const std::string& name, std::optional<int> rank) {
    LocalTask t;
    t.type = type;
    t.index = index;
    t.name = name;
    t.argv = argv;
    t.env = base_env(name);
    t.env["TF_CONFIG"] = json{{"job", job},
                              {"task", {{"type", type}, {"index", index}}},
                              {"cluster", cluster},
                              {"environment", "cloud"}}
                             .dump();
    if (rank) {
      t.env["MASTER_ADDR"] = "localhost";
      t.env["MASTER_PORT"] = torch_port;
      t.env["WORLD_SIZE"] = std::to_string(1 + workers);
      t.env["RANK"] = std::to_string(*rank);
    }
    tasks.push_back(std::move(t));
  };
  add("chief", 0, "master-replica-0", 0);
  for (int i = 0; i < ps; ++i) add("ps", i, absl::StrCat("ps-replica-", i), std::nullopt);
  for (int i = 0; i < workers; ++i) add("worker", i, absl::StrCat("worker-replica-", i), i + 1);
  for (int i = 0; i < o.evaluator_count; ++i) add("evaluator", i, absl::StrCat("evaluator-replica-", i), std::nullopt);
  return tasks;
}

absl::StatusOr<std::vector<int>> PickFreePorts(int start, int count) {
  std::vector<int> ports;
  for (int p = start; p <= 65535 && static_cast<int>(ports.size()) < count; ++p) {
    if (PortIsFree(p)) ports.push_back(p);
  }
  if (static_cast<int>(ports.size()) < count) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot find ", count, " free ports from ", start, " upward; choose another --start-port"));
  }
  return ports;
}

std::string FindMlenginePythonPath() {
  if (const char* env = std::getenv("MLENGINE_PYTHONPATH"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(exe.parent_path() / ".." / ".." / ".." / "python");  // build/src/cli/mlengine
    candidates.push_back(exe.parent_path() / ".." / ".." / "python");
    candidates.push_back(exe.parent_path() / ".." / "share" / "mlengine" / "python");
  }
  candidates.push_back("/usr/share/mlengine/python");
  for (const auto& c : candidates) {
    if (fs::is_directory(c / "mlengine", ec)) return fs::weakly_canonical(c, ec).string();
  }
  return "";
}

int RunLocalTrain(const LocalTrainOptions& options) {
  std::error_code ec;
  fs::path package = fs::weakly_canonical(fs::absolute(options.package_path), ec);
  if (ec || !fs::is_directory(package)) {
    std::fprintf(stderr, "ERROR: (mlengine.local.train) --package-path %s is not a directory\n",
                 options.package_path.c_str());
    return 1;
  }
  const std::string cwd = package.parent_path().string();
  const int ps = options.distributed ? options.parameter_server_count : 0;
  const int workers = options.distributed ? options.worker_count : 0;
  const int port_count = options.distributed ? 1 + ps + workers + 1 : 1;
  auto ports = PickFreePorts(options.start_port, port_count);
  if (!ports.ok()) {
    std::fprintf(stderr, "ERROR: (mlengine.local.train) %s\n", std::string(ports.status().message()).c_str());
    return 1;
  }
  std::vector<LocalTask> plan = PlanLocalTasks(options, *ports);
  if (!options.distributed) return RunSingle(plan[0], cwd);

  // Distributed: each task in its own process group, output piped and
  // prefixed; SIGINT/SIGTERM are forwarded.
  g_signal.store(0);
  struct sigaction on_signal {};
  on_signal.sa_handler = OnSignal;
  struct sigaction old_int {}, old_term {};
  ::sigaction(SIGINT, &on_signal, &old_int);
  ::sigaction(SIGTERM, &on_signal, &old_term);

  std::vector<Running> tasks;
  int result = 0;
  std::string failed;
  for (auto& t : plan) {
    common::SpawnOptions po;
    po.argv = t.argv;
    po.cwd = cwd;
    po.env = common::CurrentEnvironmentWith(t.env);
    po.in = common::Stdio::Inherit();
    po.out = common::Stdio::Pipe();
    po.err = common::Stdio::Pipe();
    po.group = common::ProcessGroup::kNewGroup;
    auto child = common::Spawn(po);
    if (!child.ok()) {
      std::fprintf(stderr, "ERROR: (mlengine.local.train) %s: %s\n", t.name.c_str(),
                   std::string(child.status().message()).c_str());
      result = 1;
      break;
    }
    Running r;
    r.task = std::move(t);
    r.child = std::move(*child);
    tasks.push_back(std::move(r));
  }

  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> stopping_since;  // when we asked the rest to stop
  auto stop_all = [&](int sig) {
    for (auto& r : tasks) {
      if (r.child && !r.child->exited()) {
        r.stopped_by_us = true;
        r.child->Signal(sig);
      }
    }
    if (!stopping_since) stopping_since = Clock::now();
  };
  if (result != 0) stop_all(SIGTERM);

  bool chief_done = false;
  while (true) {
    PumpOutput(tasks, 100);
    if (int sig = g_signal.exchange(0); sig != 0) {
      std::fprintf(stderr, "mlengine: received signal %d, stopping all tasks\n", sig);
      if (result == 0) result = 128 + sig;
      stop_all(sig == SIGINT ? SIGINT : SIGTERM);
    }
    bool all_exited = true;
    bool non_ps_running = false;
    for (auto& r : tasks) {
      auto code = r.child->TryWait();
      if (!code) {
        all_exited = false;
        if (r.task.type != "ps") non_ps_running = true;
        continue;
      }
      if (r.task.type == "chief" && *code == 0) chief_done = true;
      if (*code != 0 && !r.stopped_by_us && result == 0) {
        result = *code > 0 && *code < 256 ? *code : 1;
        failed = r.task.name;
        std::fprintf(stderr, "ERROR: (mlengine.local.train) %s exited with status %d; stopping the other tasks\n",
                     r.task.name.c_str(), *code);
        stop_all(SIGTERM);
      }
    }
    // Parameter servers serve until told to stop: once the chief, workers
    // and evaluators are done, stop them.
    if (result == 0 && chief_done && !non_ps_running && !all_exited) stop_all(SIGTERM);
    if (stopping_since && Clock::now() - *stopping_since > std::chrono::seconds(10)) {
      for (auto& r : tasks) {
        if (!r.child->exited()) r.child->Signal(SIGKILL);
      }
    }
    if (all_exited) {
      bool pipes = false;
      for (auto& r : tasks) pipes = pipes || PipesOpen(r);
      if (!pipes) break;
      // Grandchildren may hold the pipes; drain briefly, then give up.
      if (stopping_since && Clock::now() - *stopping_since > std::chrono::seconds(12)) break;
      if (!stopping_since) stopping_since = Clock::now();
    }
  }
  for (auto& r : tasks) {
    EmitLines(r.task.name, r.out_buf, stdout, true);
    EmitLines(r.task.name, r.err_buf, stderr, true);
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace mle::cli
