// Endpoint / token / project resolution order.

#include <gtest/gtest.h>

#include <map>

#include "cli/config.h"

namespace mle::cli {
namespace {

struct World {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;

  EnvLookup Env() const {
    return [this](const std::string& k) -> std::optional<std::string> {
      auto it = env.find(k);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
  }
  FileReader Files() const {
    return [this](const std::string& k) -> std::optional<std::string> {
      auto it = files.find(k);
      if (it == files.end()) return std::nullopt;
      return it->second;
    };
  }
  absl::StatusOr<Connection> Resolve(const GlobalFlags& flags = {}) const {
    return ResolveConnection(flags, Env(), Files());
  }
};

World Everything() {
  World w;
  w.env["HOME"] = "/home/u";
  w.env["MLENGINE_API_ENDPOINT"] = "http://env:1";
  w.env["MLENGINE_TOKEN"] = "env-token";
  w.env["MLENGINE_PROJECT"] = "env-project";
  w.env["MLENGINE_CONFIG"] = "/data/server.json";
  w.files["/data/server.json"] =
      R"({"endpoint": "http://named:2", "token_file": "/data/admin.token", "pid": 7})";
  w.files["/data/admin.token"] = "named-token\n";
  w.files["/home/u/.config/mlengine/config.json"] =
      R"({"endpoint": "http://default:3/", "token": "default-token", "project": "file-project"})";
  return w;
}

TEST(ConfigResolutionTest, FlagsWin) {
  World w = Everything();
  w.files["/tmp/tok"] = "  flag-file-token \n";
  GlobalFlags flags;
  flags.endpoint = "http://flag:9/";
  flags.token_file = "/tmp/tok";
  flags.project = "flag-project";
  auto c = w.Resolve(flags);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint, "http://flag:9");
  EXPECT_EQ(c->endpoint_source, "--endpoint");
  EXPECT_EQ(c->token, "flag-file-token");
  EXPECT_EQ(c->token_source, "--token-file");
  EXPECT_EQ(c->project, "flag-project");
  EXPECT_EQ(c->project_source, "--project");
  flags.token = "flag-token";
  EXPECT_EQ(w.Resolve(flags)->token, "flag-token");
}

TEST(ConfigResolutionTest, ThenEnvironment) {
  auto c = Everything().Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint, "http://env:1");
  EXPECT_EQ(c->endpoint_source, "MLENGINE_API_ENDPOINT");
  EXPECT_EQ(c->token, "env-token");
  EXPECT_EQ(c->token_source, "MLENGINE_TOKEN");
  EXPECT_EQ(c->project, "env-project");
  EXPECT_EQ(c->project_source, "MLENGINE_PROJECT");
}

TEST(ConfigResolutionTest, ThenTheActiveCredentialForTheTokenAlone) {
  World w = Everything();
  w.env.erase("MLENGINE_TOKEN");
  w.files["/home/u/.config/mlengine/credentials.json"] =
      R"({"account": "trainer@p.iam.mlengine.local", "token": "active-token"})";
  auto c = w.Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "active-token");  // before MLENGINE_CONFIG's admin token
  EXPECT_EQ(c->account, "trainer@p.iam.mlengine.local");
  EXPECT_EQ(c->token_source, "/home/u/.config/mlengine/credentials.json");
  EXPECT_EQ(c->endpoint, "http://env:1");
  w.env["MLENGINE_TOKEN"] = "env-token";
  EXPECT_EQ(w.Resolve()->token, "env-token");
  w.env.erase("MLENGINE_TOKEN");
  w.files["/home/u/.config/mlengine/credentials.json"] = "{damaged";
  EXPECT_EQ(w.Resolve().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConfigResolutionTest, ThenTheFileNamedByMlengineConfig) {
  World w = Everything();
  w.env.erase("MLENGINE_API_ENDPOINT");
  w.env.erase("MLENGINE_TOKEN");
  w.env.erase("MLENGINE_PROJECT");
  auto c = w.Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint, "http://named:2");
  EXPECT_EQ(c->endpoint_source, "/data/server.json");
  EXPECT_EQ(c->token, "named-token");
  EXPECT_EQ(c->token_source, "/data/server.json");
  EXPECT_EQ(c->project, "file-project");  // server.json has none; the default file does
  EXPECT_EQ(c->project_source, "/home/u/.config/mlengine/config.json");
}

TEST(ConfigResolutionTest, ThenTheDefaultFile) {
  World w = Everything();
  w.env = {{"HOME", "/home/u"}};
  auto c = w.Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint, "http://default:3");
  EXPECT_EQ(c->token, "default-token");
  EXPECT_EQ(c->project, "file-project");

  // XDG_CONFIG_HOME moves the default file.
  w.env["XDG_CONFIG_HOME"] = "/xdg";
  w.files["/xdg/mlengine/config.json"] = R"({"endpoint": "http://xdg:4", "token_file": "tok"})";
  w.files["/xdg/mlengine/tok"] = "xdg-token";
  c = w.Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint, "http://xdg:4");
  EXPECT_EQ(c->token, "xdg-token");  // relative token_file: next to the config file
}

TEST(ConfigResolutionTest, ThenDefaults) {
  World w;
  auto c = w.Resolve();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint, "http://127.0.0.1:8080");
  EXPECT_EQ(c->token, "");
  EXPECT_EQ(c->project, "default");
  EXPECT_EQ(c->project_source, "default");
  EXPECT_EQ(c->token_source, "");
  EXPECT_EQ(DefaultConfigPath(w.Env()), "");
}

TEST(ConfigResolutionTest, Errors) {
  World w;
  w.env["MLENGINE_CONFIG"] = "/nowhere.json";
  auto missing = w.Resolve();
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("/nowhere.json"), std::string::npos);

  w.env["MLENGINE_CONFIG"] = "/bad.json";
  w.files["/bad.json"] = "not json";
  EXPECT_FALSE(w.Resolve().ok());

  w.files["/bad.json"] = R"({"endpoint": 5})";
  EXPECT_FALSE(w.Resolve().ok());

  w.files["/bad.json"] = R"({"endpoint": "http://x:1", "token_file": "/missing.token"})";
  auto no_token = w.Resolve();
  ASSERT_FALSE(no_token.ok());
  EXPECT_NE(std::string(no_token.status().message()).find("/missing.token"), std::string::npos);

  World v;
  GlobalFlags flags;
  flags.endpoint = "localhost:8080";
  EXPECT_FALSE(v.Resolve(flags).ok());  // needs a scheme
}

}  // namespace
}  // namespace mle::cli
