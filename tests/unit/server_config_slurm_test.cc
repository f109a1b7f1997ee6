// The `slurm:` keys of the server's configuration that choose Slurm accounts
// (slurm.accounts, slurm.region): accepted rows and refused ones, naming the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/server_config.h"

namespace mle::server {
namespace {

using executor::slurm::AccountMode;
using ::testing::HasSubstr;

// Parses each row's YAML (after one runtime): a refused row's error names
// the key (`row.error`, a part of the message); an accepted row's config is
// handed to `check`.
template <class Row, class Check>
void ParseRows(const std::vector<Row>& rows, Check check) {
  for (const auto& row : rows) {
    const std::string runtimes = "runtimes:\n  - {name: rt, python: /usr/bin/python3, python_version: '3.11'}\n";
    auto config = ParseServerConfig(runtimes + row.yaml, "test.yaml");
    if (!row.error.empty()) {
      ASSERT_FALSE(config.ok()) << row.yaml;
      EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(config.status().message()), HasSubstr("test.yaml: " + row.error));
      continue;
    }
    ASSERT_TRUE(config.ok()) << row.yaml << config.status();
    check(row, *config);
  }
}

TEST(ServerConfigSlurmAccounts, Table) {
  struct Row {
    std::string yaml;
    AccountMode mode;
    std::string region;
    std::string error;  // part of the refusal; "" accepted
  };
  const std::vector<Row> rows = {
      {"slurm: {}\n", AccountMode::kNone, "us-central1", ""},
      {"slurm: {accounts: none, account: ml}\n", AccountMode::kNone, "us-central1", ""},
      {"slurm: {accounts: per_project, region: europe-west4}\n", AccountMode::kPerProject, "europe-west4", ""},
      {"slurm: {accounts: per_user}\n", AccountMode::kNone, "", "slurm.accounts: \"per_user\" is not one of none, per_project"},
      {"slurm: {accounts: per_project, account: ml}\n", AccountMode::kNone, "",
       "slurm.account and slurm.accounts: per_project exclude each other"},
  };
  ParseRows(rows, [](const Row& row, const ServerConfig& config) {
    EXPECT_EQ(config.slurm.settings.accounts, row.mode) << row.yaml;
    EXPECT_EQ(config.slurm.settings.region, row.region) << row.yaml;
  });
}

// `regions:` the regions this cluster serves: one by default, AI Platform's
// names only (a typo is refused naming the known ones).
TEST(ServerConfigRegions, Table) {
  struct Row {
    std::string yaml;
    std::vector<std::string> regions;
    std::string error;  // part of the refusal; "" accepted
  };
  const std::vector<Row> rows = {
      {"", {"us-central1"}, ""},
      {"regions: [us-central1, europe-west4]\n", {"us-central1", "europe-west4"}, ""},
      {"regions: [us-centrall]\n", {}, "regions: us-centrall is not an AI Platform region; known: "},
      {"regions: []\n", {}, "regions must be a list of the regions this cluster serves"},
      {"regions: us-central1\n", {}, "regions must be a list of the regions this cluster serves"},
  };
  ParseRows(rows, [](const Row& row, const ServerConfig& config) {
    EXPECT_EQ(config.regions, row.regions) << row.yaml;
  });
}

// `accounting.ml_units_per_hour`: rates that replace the defaults
// (model/usage.h) for the machine types and accelerators named; names must
// be AI Platform's, rates numbers from 0 up.
TEST(ServerConfigAccounting, Table) {
  struct Row {
    std::string yaml;
    double standard = 0;  // the rate of `standard` after parsing
    double t4 = 0;        // of one NVIDIA_TESLA_T4
    std::string error;    // part of the refusal; "" accepted
  };
  const model::UsageRates defaults = model::UsageRates::Defaults();
  const double standard = defaults.MachineRate("standard"), t4 = defaults.AcceleratorRate("NVIDIA_TESLA_T4");
  const std::vector<Row> rows = {
      {"", standard, t4, ""},
      {"accounting: {ml_units_per_hour: {machine_types: {standard: 3}}}\n", 3, t4, ""},
      {"accounting: {ml_units_per_hour: {accelerators: {NVIDIA_TESLA_T4: 0.5}, machine_types: {}}}\n", standard, 0.5,
       ""},
      {"accounting: {ml_units_per_hour: {machine_types: {standrd: 3}}}\n", 0, 0,
       "accounting.ml_units_per_hour.machine_types.standrd: not a machine type of AI Platform"},
      {"accounting: {ml_units_per_hour: {accelerators: {T4: 1}}}\n", 0, 0,
       "accounting.ml_units_per_hour.accelerators.T4: not an accelerator type of AI Platform"},
      {"accounting: {ml_units_per_hour: {machine_types: {standard: -1}}}\n", 0, 0,
       "accounting.ml_units_per_hour.machine_types.standard: expected ML units per hour"},
      {"accounting: {ml_units_per_hour: {machine_types: {standard: lots}}}\n", 0, 0,
       "accounting.ml_units_per_hour.machine_types.standard: expected ML units per hour"},
      {"accounting: {ml_units_per_hour: {gpus: {}}}\n", 0, 0,
       "accounting.ml_units_per_hour.gpus: unknown key; known: machine_types, accelerators"},
      {"accounting: {prices: {}}\n", 0, 0, "accounting.prices: unknown key; known: ml_units_per_hour"},
  };
  ParseRows(rows, [](const Row& row, const ServerConfig& config) {
    EXPECT_DOUBLE_EQ(config.usage_rates.MachineRate("standard"), row.standard) << row.yaml;
    EXPECT_DOUBLE_EQ(config.usage_rates.AcceleratorRate("NVIDIA_TESLA_T4"), row.t4) << row.yaml;
  });
}

// `retention:`, `disk:` and `webhooks:`: defaults, accepted rows, and
// refusals naming the key.
TEST(ServerConfigServiceKeys, Table) {
  struct Row {
    std::string yaml;
    std::string error;  // part of the refusal; "" accepted
  };
  const std::vector<Row> rows = {
      {"", ""},
      {"retention: {run_files: {max_age_days: 7}, logs: {max_age_days: 0.5, max_size_mb: 2048}, packages: "
       "{max_size_mb: 4096}, images: {max_age_days: 30}, check_seconds: 60}\n",
       ""},
      {"retention: {logs: {max_size_gb: 2}}\n", "retention.logs.max_size_gb: unknown key; known: max_age_days, max_size_mb"},
      {"retention: {run_files: {max_age_days: -1}}\n", "retention.run_files.max_age_days must be a number of days"},
      {"retention: {run_files: {max_size_mb: lots}}\n", "retention.run_files.max_size_mb must be a whole number"},
      {"retention: {envs: {}}\n", "retention.envs: unknown key; known: run_files, logs, packages, images, check_seconds"},
      {"retention: {images: {max_size_mb: 1.5}}\n", "retention.images.max_size_mb must be a whole number"},
      {"retention: {logs: 5}\n", "retention.logs: expected a map"},
      {"retention: 30\n", "retention: expected a map"},
      {"retention: {check_seconds: 0}\n", "retention.check_seconds must be from 1 to 86400"},
      {"disk: {reserve_mb: 64, check_seconds: 5}\n", ""},
      {"disk: {reserve_mb: -1}\n", "disk.reserve_mb must be 0 or more"},
      {"disk: {check_seconds: 0}\n", "disk.check_seconds must be from 1 to 3600"},
      {"disk: {free_mb: 1}\n", "disk.free_mb: unknown key; known: reserve_mb, check_seconds"},
      {"webhooks: {enabled: false, allow_loopback: true, max_per_project: 3}\n", ""},
      {"webhooks: {max_per_project: 0}\n", "webhooks.max_per_project must be from 1 to 1000"},
      {"webhooks: {secret: x}\n", "webhooks.secret: unknown key; known: enabled, allow_loopback, max_per_project"},
  };
  ParseRows(rows, [](const Row& row, const ServerConfig& config) {
    if (row.yaml.empty()) {
      EXPECT_FALSE(config.retention.run_files.max_age_days.has_value());
      EXPECT_FALSE(config.retention.logs.max_size_mb.has_value());
      EXPECT_EQ(config.disk.reserve_mb, 256);
      EXPECT_TRUE(config.webhooks.enabled);
      EXPECT_FALSE(config.webhooks.allow_loopback);
    }
    if (row.yaml.starts_with("retention")) {
      EXPECT_EQ(config.retention.run_files.max_age_days, 7.0);
      EXPECT_EQ(config.retention.logs.max_age_days, 0.5);
      EXPECT_EQ(config.retention.logs.max_size_mb, 2048);
      EXPECT_EQ(config.retention.packages.max_size_mb, 4096);
      EXPECT_FALSE(config.retention.packages.max_age_days.has_value());
      EXPECT_EQ(config.retention.images.max_age_days, 30.0);
      EXPECT_EQ(config.retention.check_seconds, 60);
    }
    if (row.yaml.starts_with("disk")) {
      EXPECT_EQ(config.disk.reserve_mb, 64);
    }
    if (row.yaml.starts_with("webhooks")) {
      EXPECT_FALSE(config.webhooks.enabled);
      EXPECT_EQ(config.webhooks.max_per_project, 3);
    }
  });
}

// `local.` and `slurm.` stall_after_seconds / stall_action /
// join_timeout_seconds: an hour, a flag and off by default; 0 turns the
// stall watch off; anything else is refused saying which key.
TEST(ServerConfigStalls, Table) {
  struct Row {
    std::string yaml;  // "S" stands for the section
    int64_t after = 0;
    bool fails = false;
    std::string error;  // part of the refusal ("S." for the section); "" accepted
  };
  const std::vector<Row> rows = {
      {"", 3600, false, ""},
      {"S: {stall_after_seconds: 0}\n", 0, false, ""},
      {"S: {stall_after_seconds: 600, stall_action: fail}\n", 600, true, ""},
      {"S: {stall_action: flag}\n", 3600, false, ""},
      {"S: {stall_after_seconds: -1}\n", 0, false, "S.stall_after_seconds must be 0 (never)"},
      {"S: {stall_action: kill}\n", 0, false, "S.stall_action must be \"flag\""},
      {"S: {join_timeout_seconds: -5}\n", 0, false, "S.join_timeout_seconds must be 0 (never)"},
  };
  for (const std::string section : {"local", "slurm"}) {
    std::vector<Row> in_section = rows;
    for (Row& row : in_section) {
      if (row.yaml.starts_with("S:")) row.yaml.replace(0, 1, section);
      if (row.error.starts_with("S.")) row.error.replace(0, 1, section);
    }
    ParseRows(in_section, [&section](const Row& row, const ServerConfig& config) {
      const bool local = section == "local";
      EXPECT_EQ(local ? config.stall_after_seconds : config.slurm.stall_after_seconds, row.after) << row.yaml;
      EXPECT_EQ(local ? config.stall_fails : config.slurm.stall_fails, row.fails) << row.yaml;
      EXPECT_EQ(local ? config.join_timeout_seconds : config.slurm.join_timeout_seconds, 0)
          << "off unless asked for: " << row.yaml;
    });
  }
}

// `scheduling.preemption` and `scheduling.max_retries`: preemption on,
// within projects only, and 2 retries by default; refusals name the key.
TEST(ServerConfigInterruptions, Table) {
  struct Row {
    std::string yaml;
    bool enabled = true;
    bool for_share = false;
    std::set<std::string, std::less<>> exempt;
    int retries = 2;
    std::string error;  // part of the refusal; "" accepted
  };
  const std::vector<Row> rows = {
      {"", true, false, {}, 2, ""},
      {"scheduling: {preemption: {enabled: false}}\n", false, false, {}, 2, ""},
      {"scheduling: {preemption: {fair_share: true, exempt_projects: [prod, ops]}, max_retries: 0}\n", true, true,
       {"ops", "prod"}, 0, ""},
      {"scheduling: {max_retries: 11}\n", true, false, {}, 2, "scheduling.max_retries must be from 0 to 10"},
      {"scheduling: {preempt: true}\n", true, false, {}, 2, "scheduling.preempt: unknown key"},
      {"scheduling: {preemption: {exempt: [a]}}\n", true, false, {}, 2, "scheduling.preemption.exempt: unknown key"},
      {"scheduling: {preemption: {exempt_projects: prod}}\n", true, false, {}, 2,
       "scheduling.preemption.exempt_projects must be a list"},
  };
  ParseRows(rows, [](const Row& row, const ServerConfig& config) {
    EXPECT_EQ(config.preemption.enabled, row.enabled) << row.yaml;
    EXPECT_EQ(config.preemption.for_share, row.for_share) << row.yaml;
    EXPECT_EQ(config.preemption.exempt_projects, row.exempt) << row.yaml;
    EXPECT_EQ(config.retries.infrastructure, row.retries) << row.yaml;
  });
}

}  // namespace
}  // namespace mle::server
