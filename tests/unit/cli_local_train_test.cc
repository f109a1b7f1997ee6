// The processes and environments of `mlengine local train`.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/local_train.h"

namespace mle::cli {
namespace {

using nlohmann::json;

LocalTrainOptions Options() {
  LocalTrainOptions o;
  o.module_name = "trainer.task";
  o.package_path = "/src/trainer";
  o.user_args = {"--epochs", "1"};
  o.python = "/usr/bin/python3";
  o.mlengine_pythonpath = "/opt/mlengine/python";
  return o;
}

TEST(LocalTrainPlanTest, SingleProcess) {
  LocalTrainOptions o = Options();
  o.job_dir = "/tmp/out";
  auto tasks = PlanLocalTasks(o, {40000});
  ASSERT_EQ(tasks.size(), 1u);
  const LocalTask& t = tasks[0];
  EXPECT_EQ(t.argv, (std::vector<std::string>{"/usr/bin/python3", "-m", "trainer.task", "--epochs", "1", "--job-dir",
                                                "/tmp/out"}));
  json tf = json::parse(t.env.at("TF_CONFIG"));
  EXPECT_EQ(tf, (json{{"job", {{"job_name", "trainer.task"}, {"args", {"--epochs", "1", "--job-dir", "/tmp/out"}}}},
                      {"task", json::object()},
                      {"cluster", json::object()},
                      {"environment", "cloud"}}));
  EXPECT_EQ(t.env.at("RANK"), "0");
  EXPECT_EQ(t.env.at("WORLD_SIZE"), "1");
  EXPECT_EQ(t.env.at("MASTER_PORT"), "40000");
  EXPECT_EQ(t.env.at("PYTHONPATH").rfind("/opt/mlengine/python", 0), 0u);
  EXPECT_EQ(t.env.at("MLENGINE_TASK_NAME"), "master-replica-0");
}

TEST(LocalTrainPlanTest, Distributed) {
  LocalTrainOptions o = Options();
  o.distributed = true;
  o.parameter_server_count = 2;
  o.worker_count = 2;
  o.evaluator_count = 1;
  // chief, ps0, ps1, worker0, worker1, then the torch port.
  auto tasks = PlanLocalTasks(o, {27182, 27183, 27185, 27186, 27187, 27188});
  ASSERT_EQ(tasks.size(), 6u);
  const json cluster = {{"chief", {"localhost:27182"}},
                        {"ps", {"localhost:27183", "localhost:27185"}},
                        {"worker", {"localhost:27186", "localhost:27187"}}};
  struct Want {
    const char* type;
    int index;
    const char* name;
    const char* rank;  // nullptr: no torch variables
  };
  const Want want[] = {{"chief", 0, "master-replica-0", "0"},  {"ps", 0, "ps-replica-0", nullptr},
                       {"ps", 1, "ps-replica-1", nullptr},     {"worker", 0, "worker-replica-0", "1"},
                       {"worker", 1, "worker-replica-1", "2"}, {"evaluator", 0, "evaluator-replica-0", nullptr}};
  for (size_t i = 0; i < tasks.size(); ++i) {
    const LocalTask& t = tasks[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, want[i].name);
    EXPECT_EQ(t.type, want[i].type);
    json tf = json::parse(t.env.at("TF_CONFIG"));
    EXPECT_EQ(tf["cluster"], cluster);
    EXPECT_EQ(tf["task"], (json{{"type", want[i].type}, {"index", want[i].index}}));
    EXPECT_EQ(tf["environment"], "cloud");
    EXPECT_EQ(tf["job"]["job_name"], "trainer.task");
    if (want[i].rank) {
      EXPECT_EQ(t.env.at("RANK"), want[i].rank);
      EXPECT_EQ(t.env.at("WORLD_SIZE"), "3");
      EXPECT_EQ(t.env.at("MASTER_ADDR"), "localhost");
      EXPECT_EQ(t.env.at("MASTER_PORT"), "27188");
    } else {
      EXPECT_EQ(t.env.count("RANK"), 0u);
    }
  }
}

TEST(LocalTrainPlanTest, PickFreePortsSkipsBusyOnes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int busy = ntohs(addr.sin_port);
  auto ports = PickFreePorts(busy, 2);
  ::close(fd);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 2u);
  EXPECT_GT((*ports)[0], busy);
  EXPECT_GT((*ports)[1], (*ports)[0]);
  EXPECT_FALSE(PickFreePorts(65535, 5).ok());
}

}  // namespace
}  // namespace mle::cli
