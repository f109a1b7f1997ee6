// Starts the real mlengined for a test file: port 0, a temporary data
// directory, the operator's token read from DATA_DIR/admin.token (as
// tests/integration/conftest.py does). MLENGINED names the binary.
'use strict';

const {spawn} = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

const LISTEN_RE = /^mlengined listening on http:\/\/([0-9.]+):([0-9]+)\s*$/;

// `args`: mlengined's flags beyond --listen and --data-dir (default:
// `--executor none`, a control plane that runs no job).
async function startServer({args = ['--executor', 'none'], prefix = 'mle-storage-client-'} = {}) {
  const binary = process.env.MLENGINED;
  if (!binary) throw new Error('MLENGINED must name the mlengined binary');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const dataDir = path.join(root, 'data');
  const stderr = fs.openSync(path.join(root, 'mlengined.stderr'), 'a');
  const proc = spawn(binary, ['--listen', '127.0.0.1:0', '--data-dir', dataDir, ...args], {
    stdio: ['ignore', 'pipe', stderr],
  });
  const endpoint = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('mlengined did not start within 15 s')), 15000);
    proc.on('exit', code => reject(new Error(`mlengined exited (${code}) before listening`)));
    readline.createInterface({input: proc.stdout}).once('line', line => {
      clearTimeout(timer);
      const m = LISTEN_RE.exec(line);
      if (!m) return reject(new Error(`unexpected first line: ${line}`));
      resolve({host: m[1], port: Number(m[2])});
    });
  });
  const token = fs.readFileSync(path.join(dataDir, 'admin.token'), 'utf8').split('\n')[0].trim();
  const url = `http://${endpoint.host}:${endpoint.port}`;
  return {
    proc,
    root,
    dataDir,
    bucketsDir: path.join(dataDir, 'buckets'),
    url,
    token,
    // What a trainer's STORAGE_EMULATOR_HOST holds: the credential in the path.
    emulatorHost: `${url}/_token/${token}`,
    async stop() {
      proc.kill('SIGTERM');
      await new Promise(resolve => {
        if (proc.exitCode !== null) return resolve();
        const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
        proc.on('exit', () => {
          clearTimeout(t);
          resolve();
        });
      });
      fs.rmSync(root, {recursive: true, force: true});
    },
  };
}

module.exports = {startServer};
