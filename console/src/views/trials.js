// A tuning job's trials: a table, objective per trial with the best so far,
// objective against each parameter, and parallel coordinates.
import { fill, h, scroller, stateBadge, table, text } from '../dom.js';
import { formatDuration, formatNumber, durationBetween, isTerminal } from '../format.js';
import { chart, chartBox, parallelCoordinates } from '../charts.js';
import { poll, whileRunning } from '../poll.js';
import { bestSoFar, trialObjective } from '../series.js';

const REFRESH_MS = 5000;

// Parameter names: the spec's order, then any other a trial reports.
export function paramNames(job) {
  const hp = (job.trainingInput && job.trainingInput.hyperparameters) || {};
  const names = (hp.params || []).map((p) => p.parameterName).filter(Boolean);
  for (const t of (job.trainingOutput && job.trainingOutput.trials) || []) {
    for (const k of Object.keys(t.hyperparameters || {})) if (!names.includes(k)) names.push(k);
  }
  return names;
}

const byTrialId = (a, b) => Number(a.trialId) - Number(b.trialId) || String(a.trialId).localeCompare(String(b.trialId));

// ctx.stoppedEarlyKnown === false (Vertex AI's trials, which do not say
// whether they were stopped early): no "Stopped early" column.
export function mount(root, ctx) {
  const { signal } = ctx;
  const showStopped = ctx.stoppedEarlyKnown !== false;
  const summary = h('p', { class: 'muted' });
  const tableBox = h('div');
  const trialsChartBox = chartBox({ id: 'trials-chart' });
  const paramBox = h('div', { id: 'param-charts', class: 'charts' });
  const canvas = h('canvas', { id: 'parallel-coords', role: 'img', class: 'parallel' });
  root.append(
    summary,
    h('section', { class: 'card' }, h('h2', null, 'Trials'), tableBox),
    h('section', { class: 'card' }, h('h2', null, 'Objective per trial'), trialsChartBox),
    h('section', { class: 'card' }, h('h2', null, 'Objective against each parameter'), paramBox),
    h(
      'section',
      { class: 'card' },
      h('h2', null, 'Parallel coordinates'),
      h('p', { class: 'help' }, 'One line per trial; darker and thicker is better; dashed: no objective.'),
      h('div', { class: 'canvas-box' }, canvas),
    ),
  );

  const trialsChart = chart(trialsChartBox, { title: 'objective', xLabel: 'trial', yLabel: 'objective', scatter: true, lineSeries: [1], integerX: true });
  const paramCharts = new Map();
  let last = null;
  const redrawCoords = () => last && parallelCoordinates(canvas, last.trials, last.names, last.goal);
  const resize = new ResizeObserver(redrawCoords);
  resize.observe(canvas.parentElement);
  signal.addEventListener(
    'abort',
    () => {
      resize.disconnect();
      trialsChart.destroy();
      paramCharts.forEach((c) => c.destroy());
    },
    { once: true },
  );

  function render(job) {
    const hp = (job.trainingInput && job.trainingInput.hyperparameters) || {};
    const goal = hp.goal || 'MAXIMIZE';
    const out = job.trainingOutput || {};
    const trials = [...(out.trials || [])].sort(byTrialId);
    const names = paramNames(job);
    text(
      summary,
      `Goal: ${goal} ${hp.hyperparameterMetricTag || 'objective'}. ${trials.length} trial${trials.length === 1 ? '' : 's'} of at most ${hp.maxTrials || '?'}` +
        `, ${hp.maxParallelTrials || 1} at a time; ${out.completedTrialCount || 0} completed.`,
    );

    const { table: t, tbody } = table({ id: 'trials-table', class: 'data' }, [
      'Trial',
      ...names,
      'Objective',
      'Step',
      'State',
      ...(showStopped ? ['Stopped early'] : []),
      'Duration',
    ]);
    // The best trial by the job's goal (the first of equals), marked.
    let bestId = null;
    let bestObj = null;
    for (const tr of trials) {
      const obj = trialObjective(tr);
      if (obj == null) continue;
      if (bestObj == null || (goal === 'MINIMIZE' ? obj < bestObj : obj > bestObj)) {
        bestObj = obj;
        bestId = tr.trialId;
      }
    }
    for (const tr of trials) {
      const obj = trialObjective(tr);
      const best = tr.trialId === bestId;
      tbody.append(
        h(
          'tr',
          best ? { 'data-trial-id': tr.trialId, 'data-best': 'true', class: 'best' } : { 'data-trial-id': tr.trialId },
          h('td', { class: 'trial-id' }, tr.trialId, best ? h('span', { class: 'badge badge-best', title: `best ${goal === 'MINIMIZE' ? 'lowest' : 'highest'} objective` }, 'best') : null),
          names.map((n) => {
            const v = tr.hyperparameters ? (tr.hyperparameters[n] ?? '') : '';
            return h('td', { class: 'param', 'data-param': n, title: String(v) }, formatNumber(v));
          }),
          h('td', { class: 'objective num', title: obj == null ? '' : String(obj) }, obj == null ? '—' : formatNumber(obj)),
          h('td', { class: 'num' }, tr.finalMetric && tr.finalMetric.trainingStep != null ? String(tr.finalMetric.trainingStep) : ''),
          h(
            'td',
            { class: 'state' },
            stateBadge(tr.state),
            tr.infeasibleReason ? h('div', { class: 'muted pre-wrap' }, tr.infeasibleReason) : null,
          ),
          showStopped ? h('td', { class: 'stopped-early' }, tr.isTrialStoppedEarly ? 'stopped early' : 'no') : null,
          h('td', { class: 'num' }, formatDuration(durationBetween(tr.startTime, tr.endTime))),
        ),
      );
    }
    if (!trials.length) tbody.append(h('tr', { class: 'empty-row' }, h('td', { colspan: names.length + (showStopped ? 6 : 5) }, 'No trial yet.')));
    fill(tableBox, scroller(t));

    const ids = trials.map((tr) => Number(tr.trialId));
    const objs = trials.map(trialObjective);
    const best = bestSoFar(objs, goal);
    trialsChart.update([
      { label: 'objective', points: ids.map((x, i) => [x, objs[i]]).filter((p) => p[1] != null) },
      { label: `best so far (${goal === 'MINIMIZE' ? 'lowest' : 'highest'})`, points: ids.map((x, i) => [x, best[i]]).filter((p) => p[1] != null), stepped: true },
    ]);

    for (const n of names) {
      let c = paramCharts.get(n);
      const values = trials.map((tr) => (tr.hyperparameters ? tr.hyperparameters[n] : undefined));
      const numeric = values.every((v) => v == null || v === '' || Number.isFinite(Number(v)));
      const categories = numeric ? [] : [...new Set(values.filter((v) => v != null).map(String))];
      if (!c) {
        const el = chartBox({ 'data-param': n });
        paramBox.append(el);
        c = chart(el, {
          title: n,
          xLabel: n,
          yLabel: 'objective',
          scatter: true,
          integerX: !numeric || values.every((v) => v == null || v === '' || Number.isInteger(Number(v))),
          // Categorical values sit at 0, 1, 2...; their axis shows the names.
          xValues: numeric ? undefined : (u, splits) => splits.map((s) => (Number.isInteger(s) ? categories[s] ?? '' : '')),
        });
        paramCharts.set(n, c);
      }
      const pts = [];
      trials.forEach((tr, i) => {
        const v = values[i];
        if (objs[i] == null || v == null || v === '') return;
        pts.push([numeric ? Number(v) : categories.indexOf(String(v)), objs[i]]);
      });
      c.update([{ label: 'objective', points: pts }]);
    }

    last = { trials, names, goal };
    redrawCoords();
  }

  const more = whileRunning();
  poll(
    async (ps) => {
      const job = await ctx.fetchJob(ps);
      ctx.clearError();
      render(job);
      return more(isTerminal(job.state));
    },
    REFRESH_MS,
    signal,
    ctx.setError,
  );
}
