// Fuzzes mlengined's YAML configuration (ParseServerConfig: the runtimes,
// local, tpu_hosts, gpu_types and slurm sections). Any text must give a
// configuration or INVALID_ARGUMENT, never a crash or an exception; an
// accepted configuration has runtimes with names and interpreters and only
// TPU hosts of a known type.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/server_config.h"

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "server_config_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = mle::server::ParseServerConfig(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  if (!config.ok()) {
    if (config.status().code() != absl::StatusCode::kInvalidArgument) Fail(config.status().ToString());
    return 0;
  }
  for (const auto& r : config->runtimes.runtimes()) {
    if (r.name.empty() || r.python.empty()) Fail("a runtime without a name or an interpreter was accepted");
  }
  for (const auto& t : config->tpu_hosts) {
    if (t.name.empty() || (t.type != "TPU_V2" && t.type != "TPU_V3")) Fail("a TPU host of no known type was accepted");
  }
  return 0;
}
