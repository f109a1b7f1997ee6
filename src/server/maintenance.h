// mlengined's maintenance commands: `mlengined backup` and `mlengined
// restore` (docs/operations.md). Each returns the process's exit status and
// says what it did, or why not, on stdout and stderr.
#pragma once

#include <string>

namespace mle::server {

// A backup of `data_dir` into `to`. While an mlengined serves data_dir it
// asks that one (POST /mlengine/v1/backups with the admin token, found
// through DATA_DIR/server.json) and jobs go on; otherwise it takes the data
// directory's lock, so none starts meanwhile, and writes the backup itself.
int RunBackup(const std::string& data_dir, const std::string& to);

// Restores the backup in `from` into `data_dir` (new or empty).
int RunRestore(const std::string& from, const std::string& data_dir);

}  // namespace mle::server
