// The web console in a real browser (Debian's Chromium) against a real
// mlengined: what a person sees on each page of console-contract's pages,
// with jobs that really run (tests/browser/trainers/console). One server for
// the whole file; each test opens its own browser context (its own
// sessionStorage) and fails on any CSP violation, uncaught error or dialog.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  Never, REGION, RUNTIME, Server, TERMINAL, TUNING_PKG, configYaml, describeProcs, launchBrowser, openPage, pageProblems,
  procsOfJob, screenshot, signIn, textOf, until, visible,
} from './harness.mjs';

const P = 'console-p'; // most jobs
const W = 'console-w'; // a project whose quota is one job: its second job waits
const B = 'console-b'; // P's staging bucket
const VIEWER = 'viewer@example.com'; // roles/ml.viewer on W
const V_VIEWER = 'vertex-viewer@example.com'; // roles/aiplatform.viewer on W, nothing else
const V_USER = 'vertex-user@example.com'; // roles/aiplatform.user on P, nothing else
const EXECUTOR = 'us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest'; // Vertex's prebuilt image: the first runtime
const XSS = '<img src=x onerror="window.__xss=1;alert(1)">';
const SCRIPT = '<script>window.__xss=1</script>';

let server;
let browser;
let packageUris; // the suite trainer's package, staged once by the CLI
let viewerToken;
let vViewerToken;
let vUserToken;
// Jobs made through Vertex AI's API (each with `id`): `ran` (two pools),
// `failing`, `sleeper` (runs silently until cancelled) and `tuning` in P,
// `waiting` in W behind `holder`.
const vertex = {};
const opened = []; // contexts to close, with what each saw
let tuning; // the tuning job's submission (runs while other tests do)

/** A fresh context signed in as `token` (the operator's by default). */
async function open(token, options) {
  const o = await openPage(browser, options);
  opened.push(o);
  await signIn(o.page, server, token ?? server.token);
  return o;
}

/** Fails the test when the page saw a CSP violation, an uncaught error or a dialog. */
async function assertClean({ page, seen }) {
  const problems = await pageProblems(page, seen);
  assert.deepEqual(problems, [], `the page had problems:\n${problems.join('\n')}`);
}

/** A job of the suite's trainer through jobs.create (the package staged once). */
function create(project, jobId, args, labels) {
  return server.create(project, jobId, { scaleTier: 'BASIC', packageUris, pythonModule: 'trainer.task', region: REGION,
    runtimeVersion: RUNTIME, args }, labels);
}

const rowSel = (job) => `#jobs-table tr[data-job-id="${job}"]`;

/** Whether `selector` is on the page and shown (an element kept hidden is not there for a person). */
async function shown(page, selector) {
  return (await page.locator(selector).filter({ visible: true }).count()) > 0;
}

async function waitText(page, selector, predicate, what, timeout = 15_000) {
  return until(async () => {
    const loc = page.locator(selector);
    if (!(await loc.count())) return null;
    const text = (await loc.first().textContent()) ?? '';
    return predicate(text) ? text : null;
  }, { what: `${what} (${selector})`, timeout, describe: async () => `${selector}: ${await textOf(page, selector)}\nurl: ${page.url()}` });
}

before(async () => {
  // stallAfter: W's `holder`, which sleeps without a word, is said to be stalled.
  server = await Server.start({ config: configYaml({ quotaProjects: { [W]: { JOBS: 1 } }, stallAfter: 3 }) });
  browser = await launchBrowser();
  const tuningConfig = path.join(server.root, 'hptuning_config.yaml');
  fs.writeFileSync(tuningConfig, JSON.stringify({ trainingInput: { scaleTier: 'BASIC', hyperparameters: {
    goal: 'MAXIMIZE', maxTrials: 4, maxParallelTrials: 2,
    params: [{ parameterName: 'x', type: 'DOUBLE', minValue: 0, maxValue: 1 }] } } }));
  // The first job of a package installs it (seconds); the rest reuse it.
  /** A user holding `role` on `project` alone; resolves its token. */
  const userWith = async (email, role, project) => {
    await server.ok(['admin', 'users', 'create', email]);
    const token = (await server.ok(['admin', 'users', 'create-token', email, '--lifetime=3600s'])).out.trim();
    await server.ok(['projects', 'add-iam-policy-binding', project, `--member=user:${email}`, `--role=${role}`]);
    return token;
  };
  const [, , viewer, vViewer, vUser] = await Promise.all([
    server.submit(P, B, 'hello', { args: ['--say', 'hello from the console suite'] }),
    (tuning = server.submit(P, B, 'tune', { pkg: TUNING_PKG, flags: [`--config=${tuningConfig}`, `--job-dir=gs://${B}/tune`] })),
    (async () => {
      await server.ok(['admin', 'users', 'create', VIEWER]);
      const token = (await server.ok(['admin', 'users', 'create-token', VIEWER, '--lifetime=3600s'])).out.trim();
      await server.ok(['projects', 'add-iam-policy-binding', W, `--member=user:${VIEWER}`, '--role=roles/ml.viewer']);
      return token;
    })(),
    userWith(V_VIEWER, 'roles/aiplatform.viewer', W),
    userWith(V_USER, 'roles/aiplatform.user', P),
  ]);
  viewerToken = viewer;
  vViewerToken = vViewer;
  vUserToken = vUser;
  packageUris = (await server.waitState(P, 'hello', 'SUCCEEDED')).trainingInput.packageUris;
  // W's quota is one job: `holder` holds it until cancelled, `waiter` waits.
  await create(W, 'holder', ['--say', 'holding the quota', '--sleep', '600']);
  await server.waitState(W, 'holder', 'RUNNING');
  await create(W, 'waiter', ['--say', 'ran at last']);
  // Vertex AI's jobs: the same trainer in Vertex's prebuilt image. W's goes
  // last, behind `holder` and `waiter`.
  const pool = (args, pkgs = packageUris) => ({ machineSpec: { machineType: 'n1-standard-4' }, replicaCount: '1',
    pythonPackageSpec: { executorImageUri: EXECUTOR, packageUris: pkgs, pythonModule: 'trainer.task', args } });
  await tuning;
  const tuningPackages = (await server.job(P, 'tune')).trainingInput.packageUris;
  vertex.ran = await server.vertexCreate(P, 'customJobs', { displayName: 'vertex census', labels: { team: 'vertex' },
    // The chief lingers: once it ends the job has SUCCEEDED and the worker is
    // stopped, and the worker starts a moment after it (its line must be there).
    jobSpec: { workerPoolSpecs: [pool(['--say', 'hello from vertex', '--sleep', '2']),
      pool(['--say', 'hello from vertex', '--sleep', '2'])],
      baseOutputDirectory: { outputUriPrefix: `gs://${B}/vertex` } } });
  [vertex.failing, vertex.waiting, vertex.tuning, vertex.sleeper] = await Promise.all([
    server.vertexCreate(P, 'customJobs', { displayName: 'vertex failing',
      jobSpec: { workerPoolSpecs: [pool(['--say', 'about to fail', '--fail', '3'])] } }),
    server.vertexCreate(W, 'customJobs', { displayName: 'vertex waiter', jobSpec: { workerPoolSpecs: [pool(['--say', 'ran at last'])] } }),
    server.vertexCreate(P, 'hyperparameterTuningJobs', { displayName: 'vertex search', labels: { team: 'search' },
      studySpec: { metrics: [{ metricId: 'accuracy', goal: 'MAXIMIZE' }], algorithm: 'RANDOM_SEARCH',
        parameters: [{ parameterId: 'x', doubleValueSpec: { minValue: 0, maxValue: 1 } },
          { parameterId: 'kind', categoricalValueSpec: { values: ['good', 'bad'] } }] },
      maxTrialCount: 2, parallelTrialCount: 2,
      trialJobSpec: { workerPoolSpecs: [pool(['--tag', 'accuracy'], tuningPackages)] } }),
    server.vertexCreate(P, 'customJobs', { displayName: 'vertex sleeper',
      jobSpec: { workerPoolSpecs: [pool(['--say', 'sleeping until cancelled', '--sleep', '600'])] } }),
  ]);
  await Promise.all([
    create(P, 'failing', ['--say', 'about to fail', '--warn', XSS, '--fail', '3'], { team: 'vision' }),
    create(P, 'html_log', ['--say', XSS, '--say', SCRIPT]),
    server.upload(B, 'reports/hello.txt', 'hello, bucket\n'),
    server.upload(B, `reports/${XSS}.txt`, 'markup in a name\n'),
  ]);
});

after(async () => {
  for (const o of opened) await o.context.close().catch(() => {});
  if (browser) await browser.close();
  if (server) {
    const problems = await server.finish();
    assert.deepEqual(problems, [], `${problems.join('\n')}\n${server.serverLog()}`);
  }
});

test('sign-in: a bad token shows the API message; the operator token lands on the jobs page and stays out of URLs, cookies and localStorage', async () => {
  const o = await openPage(browser);
  opened.push(o);
  const { page, context, seen } = o;
  const bad = 'mle1.' + '0'.repeat(64);
  const refusal = await server.api('GET', '/mlengine/v1/whoami', { token: bad });
  assert.equal(refusal.status, 401, refusal.text);
  await page.goto(server.consoleUrl('#/signin'));
  await page.locator('#token').fill(bad);
  await page.locator('#signin-submit').click();
  await waitText(page, '#signin-error', (t) => t.includes(refusal.json.error.message), "the API's 401 message");
  assert.ok(page.url().includes('#/signin'), page.url());

  // Any page opened without a token goes to the sign-in page.
  await page.goto(server.consoleUrl('#/cluster'));
  await until(() => page.evaluate(() => location.hash.startsWith('#/signin')), { what: 'redirect to #/signin', timeout: 10_000,
    describe: () => page.url() });

  await page.locator('#token').fill(server.token);
  await page.locator('#signin-submit').click();
  await until(() => page.evaluate(() => location.hash.startsWith('#/jobs')), { what: 'lands on #/jobs', timeout: 10_000,
    describe: async () => `${page.url()} #signin-error: ${await textOf(page, '#signin-error')}` });
  await waitText(page, '#whoami', (t) => t.trim().length > 0, 'the principal is shown');
  const stored = await page.evaluate(() => ({ session: sessionStorage.getItem('mlengine.token'),
    local: Object.keys(localStorage).map((k) => `${k}=${localStorage.getItem(k)}`) }));
  assert.equal(stored.session, server.token, 'sessionStorage mlengine.token holds the token');
  assert.ok(!stored.local.some((v) => v.includes(server.token) || v.includes(bad)), `localStorage: ${stored.local}`);
  const cookies = await context.cookies();
  assert.ok(!cookies.some((c) => c.value.includes(server.token)), JSON.stringify(cookies));
  assert.deepEqual(cookies, [], 'the console sets no cookie');
  const leaking = [...seen.requests, page.url()].filter((u) => u.includes(server.token) || u.includes(bad) || u.includes('access_token'));
  assert.deepEqual(leaking, [], 'no URL carries the token');
  await page.locator('#signout').click();
  await until(() => page.evaluate(() => location.hash.startsWith('#/signin') && sessionStorage.getItem('mlengine.token') === null),
    { what: '#signout forgets the token and shows the sign-in page', timeout: 10_000, describe: () => page.url() });
  await assertClean(o);
});

test('a token that stops working (its user deleted) signs the page out with the API message', async () => {
  const email = 'leaver@example.com';
  await server.ok(['admin', 'users', 'create', email]);
  const token = (await server.ok(['admin', 'users', 'create-token', email, '--lifetime=3600s'])).out.trim();
  await server.ok(['projects', 'add-iam-policy-binding', P, `--member=user:${email}`, '--role=roles/ml.viewer']);
  const o = await open(token);
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs?project=${P}`));
  await visible(page, rowSel('hello'));
  await server.ok(['admin', 'users', 'delete', email]);
  const refusal = await server.api('GET', '/mlengine/v1/whoami', { token });
  assert.equal(refusal.status, 401, refusal.text);
  // The jobs page refreshes every 2 s: its next call is refused.
  await until(() => page.evaluate(() => location.hash.startsWith('#/signin')), { what: 'the 401 shows the sign-in page', timeout: 10_000,
    describe: () => page.url() });
  await waitText(page, '#signin-error', (t) => t.includes(refusal.json.error.message), "the API's 401 message");
  assert.equal(await page.evaluate(() => sessionStorage.getItem('mlengine.token')), null, 'the dead token is forgotten');
  await assertClean(o);
});

test('a job submitted through the CLI appears in #jobs-table without a reload and reaches SUCCEEDED live', async () => {
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs?project=${P}`));
  await visible(page, rowSel('hello'));
  await page.evaluate(() => { window.__sameDocument = true; });
  const r = await server.submit(P, B, 'cli_live', { args: ['--say', 'submitted from the CLI', '--sleep', '1'] });
  assert.match(r.out + r.err, /cli_live/);
  await visible(page, rowSel('cli_live'));
  await waitText(page, `${rowSel('cli_live')} td.state`, (t) => t.trim() === 'SUCCEEDED', 'the row turns SUCCEEDED', 30_000);
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was reloaded');
  const link = page.locator(`${rowSel('cli_live')} td.job-id a`);
  assert.equal(await link.count(), 1, 'td.job-id holds a link');
  assert.match(await link.getAttribute('href'), new RegExp(`#/jobs/${P}/cli_live$`));
  assert.equal((await server.job(P, 'cli_live')).state, 'SUCCEEDED');
  await screenshot(page, 'jobs');
  await assertClean(o);
});

test('leaving the jobs page while it reads the projects keeps the page the user went to', async () => {
  const o = await openPage(browser);
  opened.push(o);
  const { page, context } = o;
  // The window a fast user (or a slow machine) hits: /v1/projects' body has
  // been read, the user moves on, then the jobs page's code after it runs.
  // Here that code waits for the test's go-ahead.
  await context.addInitScript(() => {
    const text = Response.prototype.text;
    let release;
    window.__projectsGate = new Promise((r) => { release = r; });
    window.__releaseProjects = release;
    Response.prototype.text = async function gated() {
      const body = await text.call(this);
      if (new URL(this.url).pathname === '/v1/projects') {
        window.__projectsRead = true;
        await window.__projectsGate;
        setTimeout(() => { window.__projectsDone = true; }, 0); // after the caller's synchronous continuation
      }
      return body;
    };
  });
  await page.goto(server.consoleUrl('#/signin'));
  await page.locator('#token').fill(server.token);
  await page.locator('#signin-submit').click();
  await until(() => page.evaluate(() => window.__projectsRead === true), { what: 'the jobs page reads /v1/projects', timeout: 10_000 });
  await page.evaluate(() => { location.hash = '#/cluster'; });
  await visible(page, '#cluster-hosts tr[data-host]');
  await page.evaluate(() => window.__releaseProjects());
  await until(() => page.evaluate(() => window.__projectsDone === true), { what: 'the held code ran', timeout: 10_000 });
  assert.equal(await page.evaluate(() => location.hash), '#/cluster', 'the jobs page, left, took the address back');
  await assertClean(o);
});

test('jobs filters: state, label and search narrow the table and stay in the URL', async () => {
  await server.waitState(P, 'failing', 'FAILED');
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs?project=${P}`));
  await visible(page, rowSel('hello'));
  const ids = () => page.locator('#jobs-table tr[data-job-id]').evaluateAll((rows) => rows.map((r) => r.dataset.jobId));
  // The rows wanted, once the address says the filter was chosen and the
  // table says it shows that filter's answer (data-filter): the previous
  // filter's rows may be the same, so the rows alone prove nothing.
  const shown = () => page.locator('#jobs-table').getAttribute('data-filter');
  const only = (want, url, filter, what) => until(async () => {
    if (!url.test(decodeURIComponent(page.url())) || (await shown()) !== filter) return null;
    const got = await ids();
    return JSON.stringify(got) === JSON.stringify(want) ? got : null;
  }, { what, timeout: 10_000, describe: async () => `rows: ${await ids()}; data-filter: ${await shown()}; url: ${page.url()}` });

  await page.locator('#state-filter').selectOption('FAILED');
  await only(['failing'], /[?&]state=FAILED/, 'state=FAILED', 'state=FAILED leaves the failed job');
  await page.locator('#state-filter').selectOption('');
  await page.locator('#label-filter').fill('team=vision');
  await only(['failing'], /[?&]label=team=vision/, 'labels.team=vision', 'label team=vision leaves the labelled job');
  assert.doesNotMatch(page.url(), /[?&]state=/);
  await page.locator('#label-filter').fill('');
  await page.locator('#search').fill('hel');
  await only(['hello'], /[?&]q=hel(&|$)/, 'jobId:hel*', 'search "hel" leaves jobId:hel*');
  assert.doesNotMatch(decodeURIComponent(page.url()), /[?&]label=/);
  await page.locator('#search').fill('nothing_like_this');
  await visible(page, '#jobs-empty');
  // The URL alone brings the filtered page back.
  await page.goto(server.consoleUrl(`#/jobs?project=${P}&state=FAILED`));
  await page.reload();
  await only(['failing'], /[?&]state=FAILED/, 'state=FAILED', 'the URL restores the state filter');
  assert.equal(await page.locator('#state-filter').inputValue(), 'FAILED');
  assert.equal(await page.locator('#project').inputValue(), P);
  await assertClean(o);
});

test('logs follow a running job; filter, first error and download', async () => {
  const job = 'logs_follow';
  // The 40 lines come over 4 s; then the job holds until the test has seen
  // some of them while it runs, and only then prints the rest and ends.
  // In P's bucket: the job sees nothing of the host beside its sandbox's
  // view (docs/security.md), where its project's bucket is.
  const hold = path.join(server.dataDir, 'buckets', B, `${job}.hold`);
  await create(P, job, ['--lines', '40', '--over', '4', '--hold', hold,
    '--warn', 'ERROR: first failure <i>here</i>', '--warn', 'ERROR: second failure']);
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs/${P}/${job}/logs`));
  // Lines arrive while the job runs: a count between the first line and the last.
  const counts = [];
  await until(async () => {
    const text = await textOf(page, '#log-count');
    const n = Number((/(\d+)/.exec(text) || [])[1]);
    if (Number.isFinite(n)) counts.push(n);
    const { state } = await server.job(P, job);
    if (TERMINAL.has(state)) throw new Never(`the job ended (${state}) before the page showed a line while it ran`);
    const running = state === 'RUNNING';
    return running && n > 0 && !(await page.locator('#log-ended').isVisible().catch(() => false)) &&
      (await page.locator('#log-view .log-line', { hasText: /line \d+ of 40/ }).count()) > 0;
  }, { what: 'some lines shown while the job is RUNNING', timeout: 15_000, interval: 100,
    describe: async () => `counts seen: ${counts}\n${await server.explain(P, job)}` });
  fs.writeFileSync(hold, 'go\n');
  await visible(page, '#log-ended', { timeout: 30_000 });
  // Followed in one streamed response, not page by page.
  const logCalls = o.seen.requests.filter((u) => u.includes(`/jobs/${job}/logs`));
  assert.ok(logCalls.length >= 1 && logCalls.every((u) => u.includes('alt=sse')), logCalls.join('\n'));
  assert.ok(logCalls.length <= 2, `one stream (two at most, where the first ended early), not a poll:\n${logCalls.join('\n')}`);
  const entries = await server.logs(P, job);
  await waitText(page, '#log-count', (t) => t.includes(`${entries.length} line`), `all ${entries.length} lines counted`);
  assert.ok(counts.some((n) => n > 0 && n < entries.length), `lines appeared progressively (counts seen: ${counts})`);
  await screenshot(page, 'logs');

  await page.locator('#log-filter-text').fill('line 7 of');
  await until(async () => {
    const lines = await page.locator('#log-view .log-line').allTextContents();
    return lines.length === 1 && lines[0].includes('line 7 of 40') ? lines : null;
  }, { what: 'the filter leaves only "line 7 of 40"', timeout: 10_000,
    describe: async () => (await page.locator('#log-view .log-line').allTextContents()).join('\n') });
  await page.locator('#log-filter-text').fill('');
  await until(async () => (await page.locator('#log-view .log-line').count()) > 1, { what: 'clearing the filter shows lines again', timeout: 10_000 });

  await page.locator('#log-first-error').click();
  const current = page.locator('#log-view .log-line.current');
  await visible(page, current);
  assert.equal(await current.count(), 1);
  assert.equal(await current.getAttribute('data-stream'), 'stderr');
  assert.match(await current.textContent(), /ERROR: first failure <i>here<\/i>/, 'the first stderr line, markup shown as text');
  assert.ok(await current.isVisible(), 'scrolled into view');
  assert.match(await current.getAttribute('data-task'), /master/);
  assert.equal(await page.locator('#log-view i').count(), 0, 'a log line with markup made an element');

  const [download] = await Promise.all([page.waitForEvent('download', { timeout: 10_000 }), page.locator('#log-download').click()]);
  const text = fs.readFileSync(await download.path(), 'utf8');
  const missing = entries.filter((e) => !text.includes(e.message)).map((e) => e.message);
  assert.deepEqual(missing, [], `the download lacks lines; it has:\n${text.slice(0, 3000)}`);
  await assertClean(o);
});

test('a failed job shows its reason in #job-error', async () => {
  const failed = await server.waitState(P, 'failing', 'FAILED');
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs/${P}/failing`));
  await waitText(page, '#job-state', (t) => t.includes('FAILED'), 'the state word');
  const firstLine = failed.errorMessage.split('\n')[0];
  await waitText(page, '#job-error', (t) => t.includes(firstLine) && t.includes(XSS), 'the errorMessage, markup as text');
  assert.equal(await page.locator('#job-error img').count(), 0);
  assert.equal(await shown(page, '#job-waiting'), false, '#job-waiting shown on a FAILED job');
  assert.equal(await shown(page, '#cancel-button'), false, '#cancel-button shown on a terminal job');
  for (const step of ['created', 'started', 'ended']) {
    assert.equal(await page.locator(`#job-timeline li[data-step="${step}"]`).count(), 1, `timeline step ${step}`);
  }
  await waitText(page, '#job-yaml', (t) => t.includes('pythonModule') && t.includes('trainer.task'), 'the trainingInput as YAML');
  const command = await waitText(page, '#job-command', (t) => t.includes('mlengine jobs submit training failing'), 'the equivalent command');
  assert.ok(command.includes(`--project=${P}`), `the command names the job's project: ${command}`);
  await o.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.endpoint });
  await page.locator('#copy-command').click();
  await until(async () => (await page.evaluate(() => navigator.clipboard.readText())) === command,
    { what: '#copy-command puts the command on the clipboard', timeout: 10_000,
      describe: async () => `clipboard: ${await page.evaluate(() => navigator.clipboard.readText())}` });
  await waitText(page, '#job-replicas', (t) => t.includes('master-replica-0'), 'the replica');
  await assertClean(o);
});

test('a waiting job says why in #job-waiting', async () => {
  const waiting = await server.job(W, 'waiter');
  assert.equal(waiting.state, 'QUEUED', JSON.stringify(waiting));
  assert.match(waiting.errorMessage, /project quota JOBS 1 in us-central1: 1 in use by job holder/);
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs/${W}/waiter`));
  await waitText(page, '#job-state', (t) => t.includes('QUEUED'), 'the state word');
  const reason = await waitText(page, '#job-waiting', (t) => t.includes('Why it waits') && t.includes(waiting.errorMessage.split('\n')[0]),
    'the reason');
  if (waiting.jobPosition) assert.ok(reason.includes(String(waiting.jobPosition)), `jobPosition ${waiting.jobPosition} in "${reason}"`);
  assert.equal(await shown(page, '#job-error'), false, '#job-error shown on a QUEUED job');
  await screenshot(page, 'job');
  await assertClean(o);
});

test('a running job silent past the operator\'s stall limit says it may be stuck in #job-waiting', async () => {
  const stalled = await until(async () => {
    const job = await server.job(W, 'holder');
    return (job.errorMessage ?? '').startsWith('Stalled: ') ? job : null;
  }, { what: 'holder flagged as stalled', timeout: 30_000 });
  assert.equal(stalled.state, 'RUNNING', JSON.stringify(stalled));
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs/${W}/holder`));
  await waitText(page, '#job-state', (t) => t.includes('RUNNING'), 'the state word');
  await waitText(page, '#job-waiting',
    (t) => t.includes('It may be stuck') && t.includes('its replicas wrote no log line and used no CPU for'), 'the note');
  assert.equal(await shown(page, '#job-error'), false, '#job-error shown on a RUNNING job');
  await assertClean(o);
});

test('a tuning job lists its trials and draws its charts (objective, per parameter, parallel coordinates, metrics)', async () => {
  await tuning;
  const done = await server.waitState(P, 'tune', 'SUCCEEDED', 120_000);
  const trials = done.trainingOutput.trials;
  assert.equal(trials.length, 4);
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs/${P}/tune/trials`));
  for (const t of trials) {
    const row = page.locator(`#trials-table tr[data-trial-id="${t.trialId}"]`);
    await visible(page, row);
    const text = await row.textContent();
    assert.ok(text.includes('SUCCEEDED'), `trial ${t.trialId}: ${text}`);
    const x = Number(t.hyperparameters.x);
    assert.ok([3, 4, 5, 6, 17].some((digits) => text.includes(String(Number(x.toPrecision(digits))))),
      `trial ${t.trialId} shows x=${t.hyperparameters.x}: ${text}`);
  }
  assert.ok(await shown(page, '#tab-trials'), 'a tuning job has the trials tab');
  // The best trial (the API lists it first) is marked, and only it.
  assert.deepEqual(await page.locator('#trials-table tr[data-best="true"]').evaluateAll((rows) => rows.map((r) => r.dataset.trialId)),
    [trials[0].trialId]);
  assert.ok((await page.locator(`#trials-table tr[data-trial-id="${trials[0].trialId}"] .badge-best`).textContent()).includes('best'));
  // A canvas counts as drawn when it has a few hundred painted pixels.
  const painted = (selector) => until(() => page.evaluate((sel) => {
    const canvas = document.querySelector(sel);
    if (!canvas || !canvas.width || !canvas.height) return null;
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let n = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i]) n++;
    return n > 100 ? n : null;
  }, selector), { what: `${selector} has painted pixels`, timeout: 10_000,
    describe: () => page.evaluate((sel) => document.querySelector(sel.split(' ')[0])?.outerHTML.slice(0, 500) ?? `(no ${sel})`, selector) });
  await painted('#trials-chart .uplot canvas');
  await painted('#param-charts div.chart[data-param="x"] .uplot canvas');
  await painted('canvas#parallel-coords');
  await screenshot(page, 'trials');
  await page.goto(server.consoleUrl(`#/jobs/${P}/tune`));
  const outputs = page.locator('#job-outputs');
  await visible(page, outputs);
  const href = await outputs.getAttribute('href');
  assert.match(href, new RegExp(`#/buckets/${B}\\?prefix=tune`), `#job-outputs links to gs://${B}/tune: ${href}`);
  await page.goto(server.consoleUrl(`#/jobs/${P}/tune/metrics`));
  // Each trial reported training/hptuning/metric at steps 1..3: one chart, a series per trial.
  await visible(page, '#metrics-charts div.chart[data-tag="training/hptuning/metric"] .uplot');
  await painted('#metrics-charts div.chart[data-tag="training/hptuning/metric"] .uplot canvas');
  await screenshot(page, 'metrics');
  await assertClean(o);
});

test('cancel: #cancel-button, confirm, CANCELLED, no process left', async () => {
  const job = 'long_cancel';
  await create(P, job, ['--say', 'sleeping until cancelled', '--sleep', '600']);
  await server.waitState(P, job, 'RUNNING');
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs/${P}/${job}`));
  await waitText(page, '#job-state', (t) => t.includes('RUNNING'), 'RUNNING');
  await page.locator('#cancel-button').click();
  await visible(page, '#confirm-dialog');
  await page.locator('#confirm-yes').click();
  await waitText(page, '#job-state', (t) => t.includes('CANCELLED'), 'CANCELLED, live', 30_000);
  assert.equal((await server.job(P, job)).state, 'CANCELLED');
  const runDir = server.runDir(P, job);
  const left = await until(() => procsOfJob(runDir, job).length === 0, { what: `no process of ${job} left`, timeout: 10_000,
    describe: () => describeProcs(procsOfJob(runDir, job)) });
  assert.ok(left);
  assert.equal(await shown(page, '#cancel-button'), false, '#cancel-button shown on a CANCELLED job');
  await assertClean(o);
});

test('a job that ran more than once lists its attempts in #job-attempts', async () => {
  // mlengine's shim killed (as the host's OOM killer would): attempt 1 is
  // lost to the infrastructure and the job runs again as attempt 2.
  const job = 'lost_once';
  await create(P, job, ['--say', 'running until cancelled', '--sleep', '600']);
  await server.waitState(P, job, 'RUNNING');
  const runDir = server.runDir(P, job);
  const shims = await until(() => {
    const found = procsOfJob(runDir, job).filter((p) => (p.cmdline[0] || '').endsWith('mlengine-replica'));
    return found.length === 1 ? found : null;
  }, { what: `the shim of ${job}`, timeout: 15_000, describe: () => describeProcs(procsOfJob(runDir, job)) });
  process.kill(shims[0].pid, 'SIGKILL');
  await until(async () => {
    const j = await server.job(P, job);
    return j.state === 'RUNNING' && (j.attempts || []).length === 1 ? j : null;
  }, { what: `${job} running again as attempt 2`, timeout: 60_000, describe: () => server.explain(P, job) });
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs/${P}/${job}`));
  await visible(page, '#job-attempts tr[data-attempt="2"]');
  const first = await textOf(page, '#job-attempts tr[data-attempt="1"]');
  assert.ok(first.includes('lost to the infrastructure') && first.includes('was killed before it could record how it ended'),
    first);
  assert.ok((await textOf(page, '#job-attempts tr[data-attempt="2"]')).includes('running'));
  await assertClean(o);
  await server.api('POST', `/v1/projects/${P}/jobs/${job}:cancel`, { body: {} });
  await server.waitState(P, job, 'CANCELLED');
  await until(() => procsOfJob(runDir + '@2', job).length === 0, { what: `no process of ${job} left`, timeout: 15_000,
    describe: () => describeProcs(procsOfJob(runDir + '@2', job)) });
});

test('a viewer sees no #cancel-button and the API refuses the cancel anyway', async () => {
  const o = await open(viewerToken);
  const { page } = o;
  const permissions = page.waitForResponse((r) => r.url().includes('/jobs/holder:testIamPermissions'), { timeout: 10_000 });
  await page.goto(server.consoleUrl(`#/jobs/${W}/holder`));
  await waitText(page, '#job-state', (t) => t.includes('RUNNING'), 'the holder RUNNING');
  const answer = await (await permissions).json();
  assert.ok(!(answer.permissions || []).includes('ml.jobs.cancel'), JSON.stringify(answer));
  // The answer is in; the page has drawn what it decided from it.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  assert.equal(await shown(page, '#cancel-button'), false, 'a viewer is offered #cancel-button');
  const refused = await page.evaluate(async (url) => {
    const res = await fetch(url, { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json',
      Authorization: `Bearer ${sessionStorage.getItem('mlengine.token')}` } });
    return { status: res.status, body: await res.json() };
  }, `/v1/projects/${W}/jobs/holder:cancel`);
  assert.equal(refused.status, 403, JSON.stringify(refused));
  assert.equal(refused.body.error.status, 'PERMISSION_DENIED');
  assert.equal((await server.job(W, 'holder')).state, 'RUNNING');
  // The buckets page says what the viewer lacks and what would grant it,
  // not a bare 403.
  await page.goto(server.consoleUrl(`#/buckets?project=${W}`));
  await waitText(page, '#page-error', (t) => t.includes('storage.buckets.list') && t.includes('Roles that grant it:') &&
    t.includes('roles/storage.admin'), 'a refusal naming the permission and the roles that grant it');
  assert.ok(!(await page.locator('#page-error').textContent()).startsWith('403'), 'a bare status line');
  await assertClean(o);
});

test('markup in labels, errors, log lines and object names renders as text', async () => {
  // The server itself refuses such a label (400, naming it) ...
  const refused = await server.api('POST', `/v1/projects/${P}/jobs`, { body: { jobId: 'xss_label', labels: { note: SCRIPT },
    trainingInput: { scaleTier: 'BASIC', packageUris, pythonModule: 'trainer.task', region: REGION, runtimeVersion: RUNTIME } } });
  assert.equal(refused.status, 400, refused.text);
  const o = await open();
  const { page, seen } = o;
  // ... so a label carrying it is put into the server's real answers on the way to the page.
  const withLabel = async (route) => {
    const res = await route.fetch();
    const body = await res.json();
    for (const job of body.jobs || [body]) if (job.jobId === 'html_log') job.labels = { ...(job.labels || {}), note: SCRIPT };
    await route.fulfill({ response: res, json: body });
  };
  await page.route((url) => url.pathname === `/v1/projects/${P}/jobs` || url.pathname === `/v1/projects/${P}/jobs/html_log`, withLabel);
  await server.waitState(P, 'html_log', 'SUCCEEDED');
  await page.goto(server.consoleUrl(`#/jobs?project=${P}`));
  await waitText(page, `${rowSel('html_log')} td.labels`, (t) => t.includes(SCRIPT), 'the label shown literally');
  await page.goto(server.consoleUrl(`#/jobs/${P}/html_log`));
  await waitText(page, '#job-id', (t) => t.includes('html_log'), 'the job page');
  await page.goto(server.consoleUrl(`#/jobs/${P}/html_log/logs`));
  await visible(page, '#log-ended');
  await until(async () => (await page.locator('#log-view .log-line', { hasText: XSS }).count()) === 1 &&
    (await page.locator('#log-view .log-line', { hasText: SCRIPT }).count()) === 1,
  { what: 'both log lines with markup shown literally', timeout: 10_000,
    describe: async () => (await page.locator('#log-view .log-line').allTextContents()).join('\n') });
  await page.goto(server.consoleUrl(`#/buckets/${B}?prefix=${encodeURIComponent('reports/')}`));
  await visible(page, `#objects-table tr[data-object="reports/${XSS.replace(/"/g, '\\"')}.txt"]`);
  await waitText(page, '#objects-table', (t) => t.includes(XSS), 'the object name literally');
  const injected = await page.evaluate(() => ({ xss: typeof window.__xss, scripts: document.querySelectorAll('body script').length,
    imgs: [...document.querySelectorAll('img')].map((i) => i.outerHTML) }));
  assert.deepEqual(injected, { xss: 'undefined', scripts: 0, imgs: [] });
  assert.deepEqual(seen.dialogs, []);
  await assertClean(o);
});

test('/console/ sends CSP, frame-ancestors and nosniff, and no page violates the CSP', async () => {
  const r = await server.api('GET', '/console/');
  assert.equal(r.status, 200);
  const csp = r.headers.get('content-security-policy') || '';
  for (const d of ["default-src 'none'", "script-src 'self'", "style-src 'self'", 'frame-ancestors']) {
    assert.ok(csp.includes(d), `CSP lacks ${d}: ${csp}`);
  }
  assert.match(csp, /frame-ancestors 'none'|frame-ancestors 'self'/, csp);
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
  assert.ok(!/<script(?![^>]*\bsrc=)[^>]*>/i.test(r.text), 'index.html has an inline script');
  assert.ok(!/<style|\sstyle=/i.test(r.text), 'index.html has inline style');
  const redirect = await fetch(`${server.endpoint}/console`, { redirect: 'manual' });
  assert.ok([301, 302, 307, 308].includes(redirect.status), `/console -> ${redirect.status}`);
  assert.match(redirect.headers.get('location') || '', /\/console\/$/);
  const asset = /src="(console-[^"]+\.js)"/.exec(r.text);
  assert.ok(asset, `index.html names no hashed console-HASH.js: ${r.text.slice(0, 500)}`);
  const js = await server.api('GET', `/console/${asset[1]}`);
  assert.equal(js.status, 200);
  assert.equal(js.headers.get('x-content-type-options'), 'nosniff');
  assert.match(js.headers.get('content-type') || '', /javascript/);

  const o = await open();
  const { page } = o;
  for (const [hash, ready] of [[`#/jobs?project=${P}`, rowSel('hello')], [`#/jobs/${P}/tune`, '#job-yaml'],
    [`#/jobs/${P}/tune/logs`, '#log-ended'], [`#/jobs/${P}/tune/metrics`, '#metrics-charts .uplot, #metrics-empty'],
    [`#/jobs/${P}/tune/trials`, '#trials-table tr[data-trial-id]'], ['#/cluster', '#cluster-hosts tr[data-host]'],
    [`#/buckets?project=${P}`, `tr[data-bucket="${B}"]`], [`#/buckets/${B}?prefix=`, '#objects-table tr']]) {
    await page.goto(server.consoleUrl(hash));
    await visible(page, page.locator(ready).filter({ visible: true }));
  }
  await assertClean(o);
});

test('a phone viewport has no horizontal page overflow and the keyboard alone opens a job', async () => {
  const o = await open(undefined, { viewport: { width: 375, height: 812 } });
  const { page } = o;
  await page.goto(server.consoleUrl(`#/jobs?project=${P}`));
  await visible(page, rowSel('hello'));
  const widths = await page.evaluate(() => ({ doc: document.documentElement.scrollWidth, body: document.body.scrollWidth,
    viewport: window.innerWidth }));
  assert.ok(widths.doc <= widths.viewport && widths.body <= widths.viewport, `the page scrolls sideways: ${JSON.stringify(widths)}`);
  await screenshot(page, 'jobs-phone');
  const target = `${rowSel('hello')} td.job-id a`;
  await page.evaluate(() => document.activeElement?.blur());
  const path = [];
  for (let i = 0; i < 100; i++) {
    await page.keyboard.press('Tab');
    const at = await page.evaluate((sel) => {
      const a = document.activeElement;
      return { hit: a === document.querySelector(sel), what: a ? `${a.tagName}#${a.id}.${a.className}` : '' };
    }, target);
    path.push(at.what);
    if (at.hit) break;
  }
  assert.ok(await page.evaluate((sel) => document.activeElement === document.querySelector(sel), target),
    `Tab never reached the job link; focus went: ${path.join(' -> ')}`);
  await page.keyboard.press('Enter');
  await until(() => page.evaluate((h) => location.hash === h, `#/jobs/${P}/hello`), { what: 'Enter opens the job', timeout: 10_000,
    describe: () => page.url() });
  await waitText(page, '#job-id', (t) => t.includes('hello'), 'the job page');
  await assertClean(o);
});

test('cluster page: the local host and the simulated TPU hosts', async () => {
  const cluster = await server.getJson('/mlengine/v1/cluster');
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl('#/cluster'));
  await waitText(page, '#cluster-executor', (t) => t.includes(cluster.executor), 'the executor');
  const local = cluster.hosts.filter((h) => !h.simulated);
  const tpus = cluster.hosts.filter((h) => h.simulated);
  assert.ok(local.length >= 1 && tpus.length === 2, JSON.stringify(cluster.hosts.map((h) => h.name)));
  for (const h of local) {
    const row = await waitText(page, `#cluster-hosts tr[data-host="${h.name}"]`, (t) => t.includes(h.name), `local host ${h.name}`);
    assert.ok(!row.includes('(simulated)'), row);
  }
  for (const h of tpus) {
    await waitText(page, `#cluster-hosts tr[data-host="${h.name}"]`, (t) => t.includes('TPU_V2') && t.includes('(simulated)'),
      `TPU host ${h.name} marked (simulated)`);
  }
  await visible(page, `#cluster-queues tr[data-project="${W}"]`);
  await screenshot(page, 'cluster');
  await assertClean(o);
});

test('buckets page lists the bucket and downloads an object', async () => {
  const o = await open();
  const { page } = o;
  await page.goto(server.consoleUrl(`#/buckets?project=${P}`));
  const bucketRow = page.locator(`#buckets-list tr[data-bucket="${B}"]`);
  await visible(page, bucketRow);
  const link = bucketRow.locator('a');
  await ((await link.count()) ? link.first() : bucketRow).click();
  const folder = page.locator('#objects-table tr[data-prefix="reports/"]');
  await visible(page, folder);
  const folderLink = folder.locator('a');
  await ((await folderLink.count()) ? folderLink.first() : folder).click();
  const object = page.locator('#objects-table tr[data-object="reports/hello.txt"]');
  await visible(page, object);
  await waitText(page, '#breadcrumbs', (t) => t.includes(B) && t.includes('reports'), 'the breadcrumbs');
  await screenshot(page, 'buckets');
  const [download] = await Promise.all([page.waitForEvent('download', { timeout: 10_000 }), object.locator('.download').click()]);
  assert.equal(fs.readFileSync(await download.path(), 'utf8'), 'hello, bucket\n');
  assert.match(download.suggestedFilename(), /hello\.txt$/);
  await assertClean(o);
});

// ---------------------------------------------------------------------------
// Vertex AI's custom jobs and tuning jobs (#/vertex)

const vrowSel = (id) => `#vertex-table tr[data-job-id="${id}"]`;
let operatorTab; // the operator's page, which the Vertex AI tests share (one sign-in)
const operatorPage = async () => (operatorTab ??= await open());
const vertexHash = (project, job, tab) =>
  `#/vertex/${project}/${REGION}/${job.name.split('/')[4]}/${job.id}${tab ? `/${tab}` : ''}`;

test('Vertex AI list: custom and tuning jobs of a project and region, filters, paging', async () => {
  await server.vertexWaitState(vertex.ran.name, 'JOB_STATE_SUCCEEDED');
  await server.vertexWaitState(vertex.failing.name, 'JOB_STATE_FAILED');
  const o = await operatorPage();
  const { page } = o;
  await page.locator('#nav-vertex').click();
  await until(() => page.evaluate(() => location.hash.startsWith('#/vertex?project=')), { what: 'the nav opens #/vertex, a project chosen',
    timeout: 10_000, describe: () => page.url() });
  assert.equal(await page.locator('#nav-vertex').getAttribute('aria-current'), 'page');
  await page.goto(server.consoleUrl(`#/vertex?project=${P}`));
  const listed = (await server.getJson(`/v1/projects/${P}/locations/${REGION}/customJobs`)).customJobs.map((j) => j.name.split('/').pop());
  assert.deepEqual(new Set(listed), new Set([vertex.ran.id, vertex.failing.id, vertex.sleeper.id]));
  const ran = await waitText(page, vrowSel(vertex.ran.id), (t) => t.includes('JOB_STATE_SUCCEEDED'), 'the custom job, SUCCEEDED');
  for (const want of ['vertex census', vertex.ran.id, '1 × n1-standard-4 + 1 × n1-standard-4', 'team=vertex']) {
    assert.ok(ran.includes(want), `the row shows ${want}: ${ran}`);
  }
  assert.equal(await page.locator(`${vrowSel(vertex.ran.id)} .badge`).getAttribute('class'), 'badge state-succeeded');
  const ids = () => page.locator('#vertex-table tr[data-job-id]').evaluateAll((rows) => rows.map((r) => r.dataset.jobId));
  const shownFilter = () => page.locator('#vertex-table').getAttribute('data-filter');
  const only = (want, url, filter, what) => until(async () => {
    if (!url.test(decodeURIComponent(page.url())) || (await shownFilter()) !== filter) return null;
    const got = await ids();
    return JSON.stringify(got) === JSON.stringify(want) ? got : null;
  }, { what, timeout: 10_000, describe: async () => `rows: ${await ids()}; data-filter: ${await shownFilter()}; url: ${page.url()}` });
  await only(listed, /#\/vertex\?project=/, '', 'newest first, as the API lists them');

  await page.locator('#state-filter').selectOption('JOB_STATE_FAILED');
  await only([vertex.failing.id], /[?&]state=JOB_STATE_FAILED/, 'state=JOB_STATE_FAILED', 'state JOB_STATE_FAILED');
  await page.locator('#state-filter').selectOption('');
  await page.locator('#search').fill('Census');
  await only([vertex.ran.id], /[?&]q=Census/, 'display_name:Census*', 'a word of the display name, any case');
  // The address alone brings a filter back.
  await page.goto(server.consoleUrl(`#/vertex?project=${P}&label=team%3Dvertex`));
  await only([vertex.ran.id], /[?&]label=team=vertex/, 'labels.team=vertex', 'label team=vertex');
  assert.equal(await page.locator('#label-filter').inputValue(), 'team=vertex');

  // Paging, one job a page.
  await page.goto(server.consoleUrl(`#/vertex?project=${P}&pageSize=1`));
  await only([listed[0]], /pageSize=1/, '', 'page 1');
  assert.equal(await page.locator('#prev-page').isDisabled(), true);
  await page.locator('#next-page').click();
  await only([listed[1]], /[?&]page=/, '', 'page 2');
  await page.locator('#prev-page').click();
  await only([listed[0]], /pageSize=1$/, '', 'back to page 1');

  // The tuning jobs; the link to one.
  await page.goto(server.consoleUrl(`#/vertex?project=${P}`));
  await visible(page, vrowSel(vertex.ran.id));
  await page.locator('#kind').selectOption('tuning');
  await only([vertex.tuning.id], /[?&]kind=tuning/, '', 'the tuning jobs');
  const tuningRow = await textOf(page, vrowSel(vertex.tuning.id));
  assert.ok(tuningRow.includes('vertex search') && tuningRow.includes('tuning: 2 trials of 1 × n1-standard-4') &&
    tuningRow.includes('team=search'), tuningRow);
  assert.equal(await page.locator(`${vrowSel(vertex.tuning.id)} td.job-id a`).getAttribute('href'), vertexHash(P, vertex.tuning));
  await screenshot(page, 'vertex');
  await assertClean(o);
  // Another region, one this cluster does not serve: the server says so;
  // the address keeps it.
  await page.locator('#region').fill('europe-west4');
  await until(async () => decodeURIComponent(page.url()).includes('region=europe-west4') &&
    ((await page.locator('#page-error').textContent()) || '').includes('Location europe-west4 is not served by this cluster'),
  { what: 'europe-west4 refused', timeout: 10_000, describe: () => page.url() });
  await assertClean(o);
});

test('a Vertex AI custom job: state, pools, replicas, timeline, outputs, config and logs; a failed one says why', async () => {
  const o = await operatorPage();
  const { page } = o;
  await page.goto(server.consoleUrl(vertexHash(P, vertex.ran)));
  await waitText(page, '#job-state', (t) => t === 'JOB_STATE_SUCCEEDED', 'the state word');
  await waitText(page, '#job-title', (t) => t === 'vertex census', 'the display name');
  assert.equal(await textOf(page, '#job-name'), vertex.ran.name);
  const chief = await waitText(page, '#job-pools tr[data-pool="0"]', (t) => t.includes('chief'), 'the chief pool');
  for (const want of ['workerpool0', 'n1-standard-4', 'trainer.task', EXECUTOR, "--say 'hello from vertex'", packageUris[0]]) {
    assert.ok(chief.includes(want), `the chief's row shows ${want}: ${chief}`);
  }
  assert.ok((await textOf(page, '#job-pools tr[data-pool="1"]')).includes('workers'));
  await waitText(page, '#job-replicas', (t) => t.includes('master-replica-0') && t.includes('worker-replica-0') &&
    t.includes('SUCCEEDED (exit 0)'), 'both replicas');
  for (const step of ['created', 'started', 'ended']) {
    assert.equal(await page.locator(`#job-timeline li[data-step="${step}"]`).count(), 1, `timeline step ${step}`);
  }
  assert.match(await page.locator('#job-outputs').getAttribute('href'), new RegExp(`#/buckets/${B}\\?prefix=vertex`));
  await waitText(page, '#job-yaml', (t) => t.includes('workerPoolSpecs:') && t.includes('pythonModule: trainer.task'), 'the spec as YAML');
  const command = await textOf(page, '#job-command');
  for (const want of ['mlengine ai custom-jobs create', `--project=${P}`, `--region=${REGION}`, "'--display-name=vertex census'",
    '--config=config.yaml', '--labels=team=vertex']) {
    assert.ok(command.includes(want), `the command has ${want}: ${command}`);
  }
  assert.equal(await shown(page, '#cancel-button'), false, '#cancel-button shown on an ended job');
  assert.equal(await shown(page, '#job-waiting'), false);
  assert.equal(await shown(page, '#tab-trials'), false, 'a custom job has no trials tab');
  await screenshot(page, 'vertex-job');
  // Its log, through mlengine's view of the job's id.
  await page.locator('#tab-logs').click();
  await visible(page, '#log-ended');
  await until(async () => (await page.locator('#log-view .log-line', { hasText: 'hello from vertex' }).count()) === 2,
    { what: "each replica's line", timeout: 10_000,
      describe: async () => (await page.locator('#log-view .log-line').allTextContents()).join('\n') });
  assert.deepEqual((await page.locator('#log-filter-replica option').allTextContents()).slice(1).sort(),
    ['master-replica-0 [master-0]', 'worker-replica-0 [worker-0]']);

  const failed = await server.vertexWaitState(vertex.failing.name, 'JOB_STATE_FAILED');
  await page.goto(server.consoleUrl(vertexHash(P, vertex.failing)));
  await waitText(page, '#job-state', (t) => t === 'JOB_STATE_FAILED', 'FAILED');
  await waitText(page, '#job-error', (t) => t.includes(failed.error.message.split('\n')[0]), "the job's error.message");
  await assertClean(o);
});

test('a Vertex AI tuning job: its study, trials and metrics', async () => {
  const done = await server.vertexWaitState(vertex.tuning.name, 'JOB_STATE_SUCCEEDED');
  assert.equal(done.trials.length, 2, JSON.stringify(done.trials));
  const o = await operatorPage();
  const { page } = o;
  await page.goto(server.consoleUrl(vertexHash(P, vertex.tuning)));
  await waitText(page, '#job-study', (t) => t.includes('MAXIMIZE accuracy') && t.includes('RANDOM_SEARCH') && t.includes('2 at most'),
    'the study');
  assert.ok((await textOf(page, '#job-parameters tr[data-parameter="kind"]')).includes('one of good, bad'));
  await waitText(page, '#job-replicas', (t) => t.includes('trial 1') && t.includes('trial 2'), "each trial's replica");
  await page.locator('#tab-trials').click();
  const objective = (t) => t.finalMeasurement.metrics.find((m) => m.metricId === 'accuracy').value;
  const best = [...done.trials].sort((a, b) => objective(b) - objective(a))[0];
  for (const t of done.trials) {
    const row = await waitText(page, `#trials-table tr[data-trial-id="${t.id}"]`, (x) => x.includes('SUCCEEDED'), `trial ${t.id}`);
    const kind = t.parameters.find((p) => p.parameterId === 'kind').value;
    assert.ok(row.includes(kind) && row.includes(String(Number(objective(t).toPrecision(6)))), `trial ${t.id}: ${row}`);
  }
  assert.deepEqual(await page.locator('#trials-table tr[data-best="true"]').evaluateAll((rows) => rows.map((r) => r.dataset.trialId)),
    [best.id]);
  assert.ok(!(await textOf(page, '#trials-table thead')).includes('Stopped early'), "Vertex's trials do not say it");
  await page.locator('#tab-metrics').click();
  await visible(page, '#metrics-charts div.chart[data-tag="accuracy"] .uplot');
  await assertClean(o);
});

test('a queued Vertex AI job says why it waits; roles/aiplatform.viewer sees it without Cancel', async () => {
  const why = await server.getJson(`/v1/projects/${W}/jobs/${vertex.waiting.id}/waiting`);
  assert.equal(why.state, 'QUEUED', JSON.stringify(why));
  assert.match(why.reason, /project quota JOBS 1 in us-central1: 1 in use by job holder/);
  const o = await open(vViewerToken);
  const { page } = o;
  await page.goto(server.consoleUrl(`#/vertex?project=${W}`));
  await waitText(page, vrowSel(vertex.waiting.id), (t) => t.includes('JOB_STATE_QUEUED'), "the viewer's list");
  const permissions = page.waitForResponse((r) => r.url().includes(`/jobs/${vertex.waiting.id}:testIamPermissions`), { timeout: 10_000 });
  await page.locator(`${vrowSel(vertex.waiting.id)} td.job-id a`).click();
  await waitText(page, '#job-state', (t) => t === 'JOB_STATE_QUEUED', 'QUEUED');
  const reason = await waitText(page, '#job-waiting', (t) => t.includes('Why it waits') && t.includes(why.reason), 'the reason');
  assert.ok(reason.includes(`Position in the project's queue: ${why.position}.`), reason);
  const answer = await (await permissions).json();
  assert.deepEqual(answer.permissions || [], [], JSON.stringify(answer));
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  assert.equal(await shown(page, '#cancel-button'), false, 'roles/aiplatform.viewer is offered #cancel-button');
  const refused = await server.api('POST', `/v1/${vertex.waiting.name}:cancel`, { token: vViewerToken, body: {} });
  assert.equal(refused.status, 403, refused.text);
  await assertClean(o);
});

test('a running Vertex AI job silent past the stall limit may be stuck; roles/aiplatform.user cancels it', async () => {
  const stalled = await until(async () => {
    const why = await server.getJson(`/v1/projects/${P}/jobs/${vertex.sleeper.id}/waiting`);
    return (why.reason ?? '').startsWith('Stalled: ') ? why : null;
  }, { what: 'the sleeper flagged as stalled', timeout: 30_000 });
  assert.equal(stalled.state, 'RUNNING', JSON.stringify(stalled));
  const o = await open(vUserToken);
  const { page } = o;
  await page.goto(server.consoleUrl(vertexHash(P, vertex.sleeper)));
  await waitText(page, '#job-state', (t) => t === 'JOB_STATE_RUNNING', 'RUNNING');
  await waitText(page, '#job-waiting', (t) => t.includes('It may be stuck') && t.includes(stalled.reason), 'the note');
  await page.locator('#cancel-button').click();
  await visible(page, '#confirm-dialog');
  assert.ok((await textOf(page, '#confirm-message')).includes('vertex sleeper'));
  await page.locator('#confirm-yes').click();
  await waitText(page, '#job-state', (t) => t === 'JOB_STATE_CANCELLED', 'CANCELLED, live', 30_000);
  assert.equal((await server.getJson(`/v1/${vertex.sleeper.name}`)).state, 'JOB_STATE_CANCELLED');
  const runDir = server.runDir(P, vertex.sleeper.id);
  await until(() => procsOfJob(runDir, vertex.sleeper.id).length === 0, { what: 'no process of the sleeper left', timeout: 10_000,
    describe: () => describeProcs(procsOfJob(runDir, vertex.sleeper.id)) });
  assert.equal(await shown(page, '#cancel-button'), false, '#cancel-button shown on a cancelled job');
  assert.equal(await shown(page, '#job-waiting'), false, '#job-waiting shown on a cancelled job');
  await assertClean(o);
});
