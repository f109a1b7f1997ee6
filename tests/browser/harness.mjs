// The browser suite's harness: a real mlengined (port 0, a temporary data
// directory and configuration), the real mlengine CLI pointed at it the
// documented way (MLENGINE_CONFIG=DATA_DIR/server.json), and Debian's
// Chromium driven by playwright-core (from console/node_modules: the
// console's package.json pins it; nothing downloads a browser).
//
// As tests/e2e/conftest.py: nothing sleeps for a fixed time; every wait polls
// a condition with a bounded deadline and fails saying what it last saw. The
// server's teardown cancels what still runs, stops mlengined with SIGTERM and
// fails when a process of the test (one naming the data directory in its
// command line or environment) is left.
//
// Environment: MLENGINED, MLENGINE (binaries; default build/src/...),
// MLE_SOURCE_DIR, MLE_CHROMIUM (default /usr/bin/chromium),
// MLE_SCREENSHOT_DIR (default build/console-screenshots).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const SOURCE_DIR = process.env.MLE_SOURCE_DIR || path.resolve(HERE, '..', '..');
export const MLENGINED = process.env.MLENGINED || path.join(SOURCE_DIR, 'build/src/server/mlengined');
export const MLENGINE = process.env.MLENGINE || path.join(SOURCE_DIR, 'build/src/cli/mlengine');
export const CHROMIUM = process.env.MLE_CHROMIUM || '/usr/bin/chromium';
export const SCREENSHOT_DIR = path.resolve(SOURCE_DIR,
  process.env.MLE_SCREENSHOT_DIR || path.join('build', 'console-screenshots'));
export const PYTHON = '/usr/bin/python3';
export const RUNTIME = 'pytorch-1.13-cpu';
export const REGION = 'us-central1';
export const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
// The suite's trainer (see its docstring) and the tuning suite's.
export const CONSOLE_PKG = path.join(HERE, 'trainers', 'console', 'trainer');
export const TUNING_PKG = path.join(SOURCE_DIR, 'tests', 'e2e', 'trainers', 'tuning', 'trainer');

/** playwright-core as the console's package.json pins it. */
export function playwright() {
  const require = createRequire(path.join(SOURCE_DIR, 'console', 'package.json'));
  try {
    return require('playwright-core');
  } catch (e) {
    throw new Error(`playwright-core is not installed in ${path.join(SOURCE_DIR, 'console', 'node_modules')} ` +
      `(scripts/install-node-deps.sh runs npm ci there): ${e.message}`);
  }
}

// ---------------------------------------------------------------------------
// Waiting

/** Thrown by an `until` probe: the condition can never hold; stop waiting. */
export class Never extends Error {}

/**
 * Polls `probe` (sync or async) until it returns a truthy value, which is
 * returned; at the deadline, or at once when the probe throws Never, fails
 * with `what` and `describe(last)`. Other errors of the probe count as "not
 * yet" (a page between two renders, a server still starting).
 */
export async function until(probe, { what, timeout = 30_000, interval = 50, describe } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  let lastError;
  let never = false;
  for (;;) {
    try {
      last = await probe();
      lastError = undefined;
      if (last) return last;
    } catch (e) {
      lastError = e;
      never = e instanceof Never;
    }
    if (never || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, interval));
  }
  let seen = lastError ? `error: ${lastError.message}` : `last: ${JSON.stringify(last)}`;
  if (describe) {
    try {
      seen += `\n${await describe(last)}`;
    } catch (e) {
      seen += `\n(describe failed: ${e.message})`;
    }
  }
  throw new Error(`${what || 'condition'}: ${never ? 'never' : `not within ${timeout} ms`}\n${seen}`);
}

// ---------------------------------------------------------------------------
// The process table (/proc), as conftest reads it

function readProc(file) {
  try {
    return fs.readFileSync(file);
  } catch {
    return null;
  }
}

/** [{pid, cmdline: [..], environ: [..], state}] of every live readable process but ours. */
export function processes() {
  const out = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const stat = readProc(`/proc/${name}/stat`);
    if (!stat) continue;
    const text = stat.toString();
    const state = text.slice(text.lastIndexOf(')') + 2).split(' ')[0];
    if (state === 'Z' || state === 'X') continue;
    const split = (b) => (b ? b.toString().split('\0').filter(Boolean) : []);
    out.push({ pid: Number(name), cmdline: split(readProc(`/proc/${name}/cmdline`)),
      environ: split(readProc(`/proc/${name}/environ`)), state });
  }
  return out;
}

const names = (text, p) => text.endsWith(p) || text.includes(p + '/');

export function procsOfDataDir(dataDir) {
  return processes().filter((p) => p.cmdline.some((a) => names(a, dataDir)) || p.environ.some((e) => names(e, dataDir)));
}

/** Processes of one job: its run directory in the command line, or CLOUD_ML_JOB_ID=job in the environment. */
export function procsOfJob(runDir, jobId) {
  const entry = `CLOUD_ML_JOB_ID=${jobId}`;
  return processes().filter((p) => p.cmdline.some((a) => names(a, runDir)) || p.environ.includes(entry));
}

export function describeProcs(procs) {
  return procs.map((p) => `  pid ${p.pid} [${p.state}]: ${p.cmdline.join(' ').slice(0, 300)}`).join('\n');
}

// ---------------------------------------------------------------------------
// Server configuration

/**
 * The e2e configuration's essentials: the runtime (Debian's python3, warm
 * starts), simulated TPU hosts, a short cancel grace, room for many small
 * replicas; `quotaProjects` maps a project to its us-central1 quota
 * (e.g. {JOBS: 1}).
 */
export function configYaml({ quotaProjects = {}, tpuV2Hosts = 2, oversubscription = 16, stallAfter = 0, extra = '' } = {}) {
  const lines = [
    'runtimes:',
    `  - name: ${RUNTIME}`,
    `    python: ${PYTHON}`,
    '    python_version: "3.11"',
    '    tpu_capable: true',
    "    description: the browser suite's runtime",
    '    warm_start: {preload: [json]}',
    'local:',
    `  cpu_oversubscription: ${oversubscription}`,
    '  replica_cpu_milli: 1000',
  ];
  // A running job silent this long is said to be stalled (0: the default, an hour).
  if (stallAfter) lines.push(`  stall_after_seconds: ${stallAfter}`);
  if (tpuV2Hosts) {
    lines.push('tpu_hosts:');
    for (let i = 1; i <= tpuV2Hosts; i++) lines.push(`  - {name: tpu-browser-v2-${i}, type: TPU_V2, simulated: true}`);
  }
  lines.push('cancel_grace_seconds: 2');
  lines.push('quotas:', '  defaults: {TPU_V2_POD_CORES: 512, TPU_V3_POD_CORES: 256}');
  const quotaNames = Object.keys(quotaProjects);
  if (quotaNames.length) {
    lines.push('  projects:');
    for (const p of quotaNames) {
      const q = Object.entries(quotaProjects[p]).map(([k, v]) => `${k}: ${v}`).join(', ');
      lines.push(`    ${p}:`, `      ${REGION}: {${q}}`);
    }
  }
  return lines.join('\n') + '\n' + extra;
}

// ---------------------------------------------------------------------------
// mlengined

export class Server {
  /** Starts one mlengined; resolves once it answers. */
  static async start({ config = configYaml(), extraArgs = [], tag = 'browser' } = {}) {
    const s = new Server();
    s.root = fs.mkdtempSync(path.join(os.tmpdir(), `mle-${tag}-`));
    s.dataDir = path.join(s.root, 'data');
    fs.mkdirSync(s.dataDir);
    s.configPath = path.join(s.root, 'mlengined.yaml');
    fs.writeFileSync(s.configPath, config);
    s.env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MLENGINE')));
    s.projects = new Set();
    s.stdoutPath = path.join(s.root, 'mlengined.out');
    s.stderrPath = path.join(s.root, 'mlengined.log');
    const out = fs.openSync(s.stdoutPath, 'w');
    const err = fs.openSync(s.stderrPath, 'w');
    s.proc = spawn(MLENGINED, ['--listen', '127.0.0.1:0', '--data-dir', s.dataDir, '--config', s.configPath, ...extraArgs],
      { stdio: ['ignore', out, err], env: s.env, cwd: s.root });
    fs.closeSync(out);
    fs.closeSync(err);
    s.exited = new Promise((resolve) => s.proc.once('exit', (code, signal) => resolve({ code, signal })));
    s.exitStatus = null;
    s.exited.then((st) => { s.exitStatus = st; });
    const first = await until(() => {
      if (s.exitStatus) throw new Error(`mlengined exited: ${JSON.stringify(s.exitStatus)}`);
      const text = fs.readFileSync(s.stdoutPath, 'utf8');
      return text.includes('\n') ? text.split('\n')[0] : null;
    }, { what: 'mlengined prints "mlengined listening on URL"', timeout: 30_000, interval: 20,
      describe: () => s.serverLog() }).catch(async (e) => {
      await s.stop();
      throw e;
    });
    const m = /^mlengined listening on (http:\/\/[0-9.]+:([0-9]+))/.exec(first);
    if (!m) {
      await s.stop();
      throw new Error(`mlengined's first stdout line is not 'mlengined listening on URL': ${first}`);
    }
    s.endpoint = m[1];
    s.serverJson = path.join(s.dataDir, 'server.json');
    const info = JSON.parse(fs.readFileSync(s.serverJson, 'utf8'));
    if (info.endpoint !== s.endpoint) throw new Error(`server.json says ${info.endpoint}, stdout ${s.endpoint}`);
    s.token = fs.readFileSync(path.join(s.dataDir, 'admin.token'), 'utf8').trim();
    s.home = path.join(s.root, 'home');
    fs.mkdirSync(s.home);
    return s;
  }

  serverLog() {
    const tail = (p) => (readProc(p) || Buffer.from('')).toString().slice(-4000);
    return `--- mlengined stdout\n${tail(this.stdoutPath)}\n--- mlengined log\n${tail(this.stderrPath)}`;
  }

  consoleUrl(hash = '') {
    return `${this.endpoint}/console/${hash}`;
  }

  runDir(project, jobId) {
    return path.join(this.dataDir, 'runs', project, jobId);
  }

  // -- HTTP (the operator's token unless `token` is given)
  async api(method, urlPath, { body, token = this.token, timeout = 60_000 } = {}) {
    const headers = { Authorization: `Bearer ${token}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(this.endpoint + urlPath, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeout) });
    const text = await res.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch { /* not JSON */ }
    return { status: res.status, text, json, headers: res.headers };
  }

  async getJson(urlPath, opts) {
    const r = await this.api('GET', urlPath, opts);
    if (r.status !== 200) throw new Error(`GET ${urlPath} -> ${r.status}: ${r.text}`);
    return r.json;
  }

  job(project, jobId) {
    return this.getJson(`/v1/projects/${project}/jobs/${jobId}`);
  }

  /** Every log entry of the job so far. */
  async logs(project, jobId) {
    const entries = [];
    let token = '';
    for (let i = 0; i < 1000; i++) {
      const page = await this.getJson(`/v1/projects/${project}/jobs/${jobId}/logs?pageToken=${encodeURIComponent(token)}`);
      const got = page.entries || [];
      entries.push(...got);
      const next = page.nextPageToken || '';
      if (!got.length || !next || next === token) break;
      token = next;
    }
    return entries;
  }

  async explain(project, jobId) {
    let job;
    try {
      job = JSON.stringify(await this.job(project, jobId), null, 1);
    } catch (e) {
      job = `(describe failed: ${e.message})`;
    }
    let log;
    try {
      log = (await this.logs(project, jobId)).map((e) => `${e.timestamp} ${e.taskName} ${e.message}`).join('\n');
    } catch (e) {
      log = `(logs unavailable: ${e.message})`;
    }
    return `job ${project}/${jobId}: ${job}\n--- job log\n${log.slice(-6000)}\n${this.serverLog()}`;
  }

  async waitState(project, jobId, states, timeout = 120_000) {
    const want = new Set(typeof states === 'string' ? [states] : states);
    const job = await until(async () => {
      const j = await this.job(project, jobId);
      if (want.has(j.state)) return j;
      if (TERMINAL.has(j.state)) throw new Never(`it ended ${j.state}`);
      return null;
    }, { what: `job ${jobId} reaches ${[...want]}`, timeout, interval: 100, describe: () => this.explain(project, jobId) });
    return job;
  }

  // -- the CLI

  /** The environment `mlengine` runs in as the operator, in `project` when given, plus `env`. */
  cliEnv(project, env = {}) {
    const e = { ...this.env, HOME: this.home, MLENGINE_CONFIG: this.serverJson, MLENGINE_BIN: MLENGINE, ...env };
    delete e.XDG_CONFIG_HOME;
    if (project) e.MLENGINE_PROJECT = project;
    return e;
  }

  /** Runs `mlengine ARGS` as the operator in `project`; resolves {rc, out, err}. */
  cli(args, { project, env = {}, timeout = 180_000, cwd } = {}) {
    if (project) this.projects.add(project);
    return new Promise((resolve, reject) => {
      const p = spawn(MLENGINE, args, { env: this.cliEnv(project, env), cwd: cwd || this.root, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      p.stdout.on('data', (d) => { out += d; });
      p.stderr.on('data', (d) => { err += d; });
      const timer = setTimeout(() => p.kill('SIGKILL'), timeout);
      p.on('error', reject);
      p.on('close', (rc, signal) => {
        clearTimeout(timer);
        resolve({ rc: rc ?? `signal ${signal}`, out, err, args });
      });
    });
  }

  async ok(args, opts) {
    const r = await this.cli(args, opts);
    if (r.rc !== 0) throw new Error(`mlengine ${args.join(' ')} -> rc=${r.rc}\n--- stdout\n${r.out}\n--- stderr\n${r.err}`);
    return r;
  }

  /**
   * `mlengine jobs submit training` with gcloud's flags, as a user types it;
   * `args` go to the trainer after `--`.
   */
  submit(project, bucket, jobId, { pkg = CONSOLE_PKG, module = 'trainer.task', flags = [], args = [] } = {}) {
    return this.ok(['jobs', 'submit', 'training', jobId, `--staging-bucket=gs://${bucket}`, `--region=${REGION}`,
      `--runtime-version=${RUNTIME}`, `--package-path=${pkg}`, `--module-name=${module}`, ...flags,
      ...(args.length ? ['--', ...args] : [])], { project });
  }

  /** jobs.create through the REST API with a trainingInput of the caller's. */
  async create(project, jobId, trainingInput, labels) {
    this.projects.add(project);
    const r = await this.api('POST', `/v1/projects/${project}/jobs`, { body: { jobId, labels, trainingInput } });
    if (r.status !== 200) throw new Error(`jobs.create ${jobId} -> ${r.status}: ${r.text}`);
    return r.json;
  }

  /**
   * customJobs.create (collection 'customJobs') or hyperparameterTuningJobs.create
   * of `body` in `project` and REGION, through Vertex AI's REST API: the job,
   * with `id` (its name's last segment) added.
   */
  async vertexCreate(project, collection, body) {
    this.projects.add(project);
    const r = await this.api('POST', `/v1/projects/${project}/locations/${REGION}/${collection}`, { body });
    if (r.status !== 200) throw new Error(`${collection}.create -> ${r.status}: ${r.text}`);
    return { ...r.json, id: r.json.name.split('/').pop() };
  }

  /** Waits until the Vertex AI job `name` is in one of `states` (JOB_STATE_...). */
  async vertexWaitState(name, states, timeout = 120_000) {
    const want = new Set(typeof states === 'string' ? [states] : states);
    const ended = new Set(['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED']);
    const [, project, , , , id] = name.split('/');
    return until(async () => {
      const j = await this.getJson(`/v1/${name}`);
      if (want.has(j.state)) return j;
      if (ended.has(j.state)) throw new Never(`it ended ${j.state}`);
      return null;
    }, { what: `${name} reaches ${[...want]}`, timeout, interval: 100, describe: () => this.explain(project, id) });
  }

  /** objects.insert (a media upload) of `data` as gs://bucket/name. */
  async upload(bucket, name, data, contentType = 'text/plain') {
    const url = `${this.endpoint}/upload/storage/v1/b/${encodeURIComponent(bucket)}/o?uploadType=media&name=${encodeURIComponent(name)}`;
    const res = await fetch(url, { method: 'POST', body: data,
      headers: { Authorization: `Bearer ${this.token}`, 'Content-Type': contentType } });
    if (res.status !== 200) throw new Error(`upload gs://${bucket}/${name} -> ${res.status}: ${await res.text()}`);
    return res.json();
  }

  // -- teardown

  async stop() {
    if (!this.proc || this.exitStatus) return this.exitStatus;
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 15_000);
    const st = await this.exited;
    clearTimeout(timer);
    return st;
  }

  /** Cancels unfinished jobs, stops the server; returns the problems seen (empty: clean). */
  async finish() {
    const problems = [];
    if (!this.exitStatus) {
      const unfinished = [];
      for (const project of this.projects) {
        const r = await this.api('GET', `/v1/projects/${project}/jobs?pageSize=1000`).catch(() => null);
        for (const j of r?.json?.jobs || []) {
          if (TERMINAL.has(j.state)) continue;
          unfinished.push([project, j.jobId]);
          await this.api('POST', `/v1/projects/${project}/jobs/${j.jobId}:cancel`, { body: {} });
        }
        // Vertex AI's jobs (the ml v1 list leaves them out); their ml v1
        // `waiting` view says when they ended.
        for (const collection of ['customJobs', 'hyperparameterTuningJobs']) {
          const v = await this.api('GET', `/v1/projects/${project}/locations/${REGION}/${collection}?pageSize=1000`).catch(() => null);
          for (const j of v?.json?.[collection] || []) {
            if (['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED'].includes(j.state)) continue;
            unfinished.push([project, j.name.split('/').pop(), 'waiting']);
            await this.api('POST', `/v1/${j.name}:cancel`, { body: {} });
          }
        }
      }
      const deadline = Date.now() + 30_000;
      for (const [project, jobId, view] of unfinished) {
        const read = () => (view ? this.getJson(`/v1/projects/${project}/jobs/${jobId}/${view}`) : this.job(project, jobId));
        while (Date.now() < deadline && !TERMINAL.has((await read().catch(() => ({}))).state)) {
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    }
    const st = await this.stop();
    if (st && st.code !== 0 && st.signal !== 'SIGTERM') {
      problems.push(`mlengined exited with ${JSON.stringify(st)} on SIGTERM`);
    }
    let left = procsOfDataDir(this.dataDir);
    const deadline = Date.now() + 10_000;
    while (left.length && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      left = procsOfDataDir(this.dataDir);
    }
    if (left.length) {
      problems.push(`processes of the test left behind after mlengined stopped (data dir ${this.dataDir}):\n${describeProcs(left)}`);
      for (const p of left) {
        try { process.kill(p.pid, 'SIGKILL'); } catch { /* gone */ }
      }
    }
    if (!problems.length && !process.env.MLE_KEEP_TMP) fs.rmSync(this.root, { recursive: true, force: true });
    return problems;
  }
}

// ---------------------------------------------------------------------------
// The browser

export async function launchBrowser() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (scripts/install-deps.sh installs Debian's chromium)`);
  // No sandbox (the tests run as root in CI); nothing of Chromium's own
  // traffic (component updates, sync, safe browsing lookups): the machines
  // that run the tests reach no outside host, and each refused connection
  // would only slow the page down.
  return playwright().chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-default-apps'],
  });
}

/**
 * A fresh context (its own sessionStorage) and page that records what a
 * console must never produce: CSP violations, uncaught errors, dialogs
 * (alert() from injected markup), and every URL it requested.
 */
export async function openPage(browser, { viewport = { width: 1280, height: 800 }, acceptDownloads = true } = {}) {
  const context = await browser.newContext({ viewport, acceptDownloads });
  await context.addInitScript(() => {
    window.__cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI} at ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  context.setDefaultTimeout(15_000);
  const page = await context.newPage();
  const seen = { pageErrors: [], consoleErrors: [], dialogs: [], requests: [], cspConsole: [] };
  page.on('pageerror', (e) => seen.pageErrors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    seen.consoleErrors.push(m.text());
    if (/Content Security Policy/i.test(m.text())) seen.cspConsole.push(m.text());
  });
  page.on('dialog', (d) => {
    seen.dialogs.push(`${d.type()}: ${d.message()}`);
    d.dismiss().catch(() => {});
  });
  page.on('request', (r) => seen.requests.push(r.url()));
  return { context, page, seen };
}

/** Problems a page must never have: CSP violations, uncaught errors, dialogs. */
export async function pageProblems(page, seen) {
  const violations = await page.evaluate(() => window.__cspViolations || []).catch(() => []);
  return [...violations.map((v) => `CSP violation: ${v}`), ...seen.cspConsole.map((v) => `CSP console: ${v}`),
    ...seen.pageErrors.map((e) => `uncaught: ${e}`), ...seen.dialogs.map((d) => `dialog: ${d}`)];
}

/**
 * Signs in through #/signin with `token`; resolves once the jobs page has
 * chosen its project (the address names it), so that the test's own
 * navigation comes after the page's (see the test of leaving the jobs page while it reads
 * the projects, in console.test.mjs).
 */
export async function signIn(page, server, token = server.token) {
  const res = await page.goto(server.consoleUrl('#/signin'));
  if (res.status() !== 200) {
    throw new Error(`the console is not served at ${server.consoleUrl()}: ${res.status()} ${(await res.text()).slice(0, 300)}`);
  }
  await page.locator('#token').fill(token);
  await page.locator('#signin-submit').click();
  await until(() => page.evaluate(() => location.hash.startsWith('#/jobs?project=') ||
    (location.hash.startsWith('#/jobs') && !!document.querySelector('#page-error:not([hidden]), #jobs-empty'))), {
    what: 'the sign-in lands on #/jobs, its project chosen', timeout: 15_000,
    describe: async () => `url ${page.url()}; #signin-error: ${await page.locator('#signin-error').textContent().catch(() => '?')}`,
  });
}

/** Saves a PNG of the page (its viewport) as SCREENSHOT_DIR/NAME.png. */
export async function screenshot(page, name) {
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`) });
}

/**
 * Waits until `selector` (a CSS selector or a Locator) is visible; on timeout
 * fails with what the page showed instead: its URL, #page-error and text.
 */
export async function visible(page, selector, { timeout = 15_000, state = 'visible' } = {}) {
  const loc = typeof selector === 'string' ? page.locator(selector) : selector;
  try {
    await loc.first().waitFor({ state, timeout });
  } catch (e) {
    const body = await page.evaluate(() => document.body?.innerText ?? '').catch((err) => `(no text: ${err.message})`);
    throw new Error(`${loc} not ${state} within ${timeout} ms\nurl: ${page.url()}\n#page-error: ` +
      `${await textOf(page, '#page-error')}\npage text:\n${body.slice(0, 2000)}`);
  }
  return loc;
}

/** Text of a locator, or a note that it is absent (for failure messages). */
export async function textOf(page, selector) {
  const loc = page.locator(selector);
  if (!(await loc.count())) return `(${selector} absent)`;
  return (await loc.first().textContent()) ?? '';
}
