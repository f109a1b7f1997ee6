// The web console in Debian's Chromium against a real mlengined, each figure
// beside a peer measured in the same run (bench/run.sh; docs/console.md):
//
// (a) the jobs page of a project with 10,000 jobs: navigation (a full page
//     load of /console/#/jobs?project=P, token already in sessionStorage) to
//     its first 50 rows in #jobs-table, timed inside the page
//     (performance.now(), whose origin is the navigation's start), median of
//     the reloads after a first load that fills the HTTP cache, as a
//     returning user has it; target under 300 ms. The first load (a fresh
//     browser context: nothing cached) is printed beside it. Peer:
//     `mlengine jobs list --limit 50` (the same first page from the CLI),
//     wall time, median.
//     The jobs are QUEUED and stay so, deterministically: the project's quota
//     is one job (quotas.projects.P.us-central1.JOBS: 1) and a first job that
//     sleeps holds it, so the other 10,000 wait for it ("project quota JOBS 1
//     in us-central1: 1 in use by job hold") and never run.
// (b) the log view following a job that prints 1,000 lines a second for 10 s,
//     each line carrying its epoch-ms time: the lag from a line's time to the
//     moment #log-count first counts it (a MutationObserver in the page, so
//     every line is measured although the virtualised list renders only the
//     visible rows), p50/p95, and the main thread's longest task
//     (PerformanceObserver 'longtask': tasks over 50 ms) and the longest gap
//     between two animation frames. Peer: `mlengine jobs stream-logs` of
//     the same job, run at the same time: lag from a line's time to its
//     arrival on the CLI's stdout.
//
// Usage: node bench/console.mjs [BUILD_DIR]  (default build; the console must
// be built: BUILD/src/server/console). Env: MLE_BENCH_JOBS (10000),
// MLE_BENCH_SAMPLES (5), MLE_BENCH_LOG_RATE (1000), MLE_BENCH_LOG_SECONDS (10).

import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

const build = path.resolve(process.argv[2] || 'build');
process.env.MLENGINED ||= path.join(build, 'src/server/mlengined');
process.env.MLENGINE ||= path.join(build, 'src/cli/mlengine');
const { Server, configYaml, launchBrowser, openPage, signIn, until } = await import('../tests/browser/harness.mjs');

const JOBS = Number(process.env.MLE_BENCH_JOBS || 10_000);
const SAMPLES = Number(process.env.MLE_BENCH_SAMPLES || 5);
const RATE = Number(process.env.MLE_BENCH_LOG_RATE || 1000);
const SECONDS = Number(process.env.MLE_BENCH_LOG_SECONDS || 10);
const Q = 'bench-queued'; // 10,000 QUEUED jobs
const L = 'bench-logs';
const BUCKET = 'bench-console';

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const fmt = (x, d = 1) => x.toFixed(d).padStart(9);

/** Runs `mlengine ARGS` in `project`; resolves its wall time in ms and its output (fails unless rc 0). */
async function timedCli(server, args, project) {
  const t0 = performance.now();
  const { out } = await server.ok(args, { project });
  return { ms: performance.now() - t0, out };
}

const queuedId = (i) => `queued_${String(i).padStart(5, '0')}`;

/** Runs `each(i)` for i in 0..count-1, `parallel` at a time. */
async function forEachParallel(count, each, parallel = 16) {
  let next = 0;
  const worker = async () => {
    while (next < count) await each(next++);
  };
  await Promise.all(Array.from({ length: parallel }, worker));
}

async function jobsPage(server, browser) {
  await server.submit(Q, BUCKET, 'hold', { args: ['--say', 'holding the quota', '--sleep', '3600'] });
  const held = await server.waitState(Q, 'hold', 'RUNNING');
  const t0 = performance.now();
  const trainingInput = { ...held.trainingInput, args: ['--say', 'never runs'] };
  await forEachParallel(JOBS, (i) => server.create(Q, queuedId(i), trainingInput));
  const created = (performance.now() - t0) / 1000;
  const last = await server.job(Q, queuedId(JOBS - 1));
  if (last.state !== 'QUEUED') throw new Error(`the last job is ${last.state}, not QUEUED: ${JSON.stringify(last)}`);

  const { page, context } = await openPage(browser);
  await context.addInitScript(() => {
    // Records when #jobs-table first holds 50 rows, on the page's own clock.
    const check = () => {
      if (window.__first50 === undefined && document.querySelectorAll('#jobs-table tr[data-job-id]').length >= 50) {
        window.__first50 = performance.now();
      }
    };
    new MutationObserver(check).observe(document, { childList: true, subtree: true });
  });
  // Signed in as the sign-in page leaves it (the token in sessionStorage), so
  // that the first navigation is a full load with nothing cached.
  await context.addInitScript((token) => sessionStorage.setItem('mlengine.token', token), server.token);
  const url = server.consoleUrl(`#/jobs?project=${Q}`);
  const pageMs = [];
  let coldMs;
  for (let i = 0; i <= SAMPLES; i++) {
    if (i === 0) await page.goto(url);
    else await page.reload();
    const ms = await until(() => page.evaluate(() => window.__first50), { what: 'the first 50 rows', timeout: 30_000 });
    // The first load fills the HTTP cache (hashed names, cached as immutable), as a returning user has it.
    if (i > 0) pageMs.push(ms);
    else coldMs = ms;
  }
  const rows = await page.locator('#jobs-table tr[data-job-id]').count();
  await context.close();

  const cliMs = [];
  for (let i = 0; i <= SAMPLES; i++) {
    const { ms, out } = await timedCli(server, ['jobs', 'list', '--limit', '50'], Q);
    if (i > 0) cliMs.push(ms);
    if (out.trim().split('\n').length < 50) throw new Error(`jobs list printed fewer than 50 jobs:\n${out}`);
  }
  const p = median(pageMs);
  const c = median(cliMs);
  console.log(`${JOBS} QUEUED jobs in one project (created in ${created.toFixed(1)} s); medians of ${SAMPLES}; rows rendered: ${rows}`);
  console.log(`${'jobs page: navigation to 50 rows'.padEnd(48)} ${fmt(p)} ms   (target < 300 ms: ${p < 300 ? 'met' : 'NOT met'})`);
  console.log(`${'  (the first load, nothing cached)'.padEnd(48)} ${fmt(coldMs)} ms`);
  console.log(`${'peer: mlengine jobs list --limit 50 (wall)'.padEnd(48)} ${fmt(c)} ms`);
  console.log(`${'ratio page / CLI'.padEnd(48)} ${fmt(p / c, 2)}`);
  // The queued jobs first, so that none starts when the hold ends.
  await forEachParallel(JOBS, (i) => server.api('POST', `/v1/projects/${Q}/jobs/${queuedId(i)}:cancel`, { body: {} }));
  await server.api('POST', `/v1/projects/${Q}/jobs/hold:cancel`, { body: {} });
  await server.waitState(Q, 'hold', 'CANCELLED');
}

async function logView(server, browser) {
  // Stage the trainer once (its first job installs the package).
  await server.submit(L, BUCKET, 'stage', { args: ['--say', 'staged'] });
  const staged = await server.waitState(L, 'stage', 'SUCCEEDED');
  const job = 'log_rate';
  const { page, context } = await openPage(browser);
  await context.addInitScript(() => {
    window.__counts = []; // [Date.now(), N] each time #log-count changes
    window.__longest = 0;
    window.__longtasks = 0;
    window.__frameGap = 0; // the longest time between two animation frames
    let lastFrame = 0;
    const frame = (t) => {
      if (lastFrame) window.__frameGap = Math.max(window.__frameGap, t - lastFrame);
      lastFrame = t;
      requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        window.__longtasks++;
        window.__longest = Math.max(window.__longest, e.duration);
      }
    }).observe({ type: 'longtask', buffered: true });
    let last = -1;
    new MutationObserver(() => {
      const el = document.getElementById('log-count');
      const n = el ? Number((/(\d+)/.exec(el.textContent) || [])[1]) : NaN;
      if (Number.isFinite(n) && n !== last) {
        last = n;
        window.__counts.push([Date.now(), n]);
      }
    }).observe(document, { childList: true, subtree: true, characterData: true });
  });
  await signIn(page, server);
  // The job waits two seconds before its first line, so that the page and the CLI follow it from the start.
  await server.create(L, job, { ...staged.trainingInput, args: ['--delay', '2', '--say', 'starting', '--rate', String(RATE),
    '--over', String(SECONDS)] });
  await page.goto(server.consoleUrl(`#/jobs/${L}/${job}/logs`));
  await page.locator('#log-view').waitFor();
  // The page has loaded: from here on, only following counts.
  await page.evaluate(() => { window.__longest = 0; window.__longtasks = 0; window.__frameGap = 0; });
  const cliLags = []; // stream-logs is read line by line as it prints: spawned here, not through server.cli
  const cli = new Promise((resolve, reject) => {
    const p = spawn(process.env.MLENGINE, ['jobs', 'stream-logs', job], { env: server.cliEnv(L), stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    p.stdout.on('data', (d) => {
      const now = Date.now();
      buf += d;
      const lines = buf.split('\n');
      buf = lines.pop();
      for (const l of lines) {
        const m = / bench \d+ t=(\d+\.\d)$/.exec(l);
        if (m) cliLags.push(now - Number(m[1]));
      }
    });
    p.on('close', (rc) => (rc === 0 ? resolve() : reject(new Error(`stream-logs: ${rc}`))));
  });
  await server.waitState(L, job, 'SUCCEEDED', (SECONDS + 60) * 1000);
  await page.locator('#log-ended').waitFor({ timeout: 60_000 });
  await cli;
  const entries = await server.logs(L, job);
  const { counts, longest, longtasks, frameGap } = await page.evaluate(() => ({ counts: window.__counts, longest: window.__longest,
    longtasks: window.__longtasks, frameGap: window.__frameGap }));
  await context.close();
  // Entry k (in the API's order) appeared when #log-count first reached k + 1.
  const pageLags = [];
  let c = 0;
  entries.forEach((e, k) => {
    const m = /^bench \d+ t=(\d+\.\d)$/.exec(e.message);
    if (!m) return;
    while (c < counts.length && counts[c][1] < k + 1) c++;
    if (c < counts.length) pageLags.push(counts[c][0] - Number(m[1]));
  });
  const lines = entries.filter((e) => e.message.startsWith('bench ')).length;
  if (pageLags.length < lines * 0.99) throw new Error(`the page counted ${pageLags.length} of ${lines} lines`);
  const pp50 = pct(pageLags, 50);
  const pp95 = pct(pageLags, 95);
  const cp50 = pct(cliLags, 50);
  const cp95 = pct(cliLags, 95);
  console.log(`a job printing ${RATE} lines/s for ${SECONDS} s (${lines} lines); lag = shown - printed`);
  console.log(`${''.padEnd(40)} ${'p50 ms'.padStart(9)} ${'p95 ms'.padStart(9)}`);
  const tasks = longtasks ? `longest task ${longest.toFixed(0)} ms (${longtasks} over 50 ms)` : 'no task over 50 ms';
  console.log(`${'log view (#log-count)'.padEnd(40)} ${fmt(pp50)} ${fmt(pp95)}   ${tasks}; longest frame ${frameGap.toFixed(0)} ms`);
  console.log(`${'peer: mlengine jobs stream-logs'.padEnd(40)} ${fmt(cp50)} ${fmt(cp95)}   (${cliLags.length} lines)`);
  console.log(`${'ratio page / CLI'.padEnd(40)} ${fmt(pp50 / cp50, 2)} ${fmt(pp95 / cp95, 2)}`);
}

const server = await Server.start({ tag: 'bench', config: configYaml({ quotaProjects: { [Q]: { JOBS: 1 } } }) });
let browser;
try {
  browser = await launchBrowser();
  console.log(`machine: ${os.cpus().length} cores; Chromium ${browser.version()} headless; mlengined ${server.endpoint}`);
  console.log(`\n-- (a) the jobs page with ${JOBS} jobs against the CLI's first page`);
  await jobsPage(server, browser);
  console.log(`\n-- (b) the log view at ${RATE} lines/s against the CLI's stream-logs`);
  await logView(server, browser);
} finally {
  if (browser) await browser.close();
  const problems = await server.finish();
  if (problems.length) {
    console.error(problems.join('\n'));
    process.exitCode = 1;
  }
}
