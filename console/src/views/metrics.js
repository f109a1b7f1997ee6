// Hypertune-reported metrics: one chart per tag, one series per replica (and
// trial), over steps; live every 5 s while the job runs.
import { api } from '../api.js';
import { h, presence } from '../dom.js';
import { isTerminal, taskTag } from '../format.js';
import { chart, chartBox } from '../charts.js';
import { poll, whileRunning } from '../poll.js';

const REFRESH_MS = 5000;

// {series: [...]} -> Map tag -> [{label, points: [[step, value]]}], tags sorted.
export function groupByTag(res) {
  const byTag = new Map();
  for (const s of res.series || []) {
    const label = `${taskTag(s.taskName)}${s.trialId ? ` trial ${s.trialId}` : ''}`;
    const points = (s.points || [])
      .map((p) => [Number(p.step), Number(p.value)])
      .filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    if (!byTag.has(s.tag)) byTag.set(s.tag, []);
    byTag.get(s.tag).push({ label, points });
  }
  return new Map([...byTag].sort(([a], [b]) => a.localeCompare(b)));
}

export function mount(root, ctx) {
  const { signal } = ctx;
  const box = h('div', { id: 'metrics-charts', class: 'charts' });
  const empty = presence(h('p', { id: 'metrics-empty', class: 'empty' }, 'No metric has been reported (yet).'));
  root.append(box, empty.node);
  const charts = new Map();
  signal.addEventListener('abort', () => charts.forEach((c) => c.chart.destroy()), { once: true });

  const more = whileRunning();
  poll(
    async (ps) => {
      const job = await ctx.fetchJob(ps);
      const res = await api(`${ctx.path}/metrics`, { signal: ps });
      ctx.clearError();
      const groups = groupByTag(res);
      empty.show(groups.size === 0);
      for (const [tag, series] of groups) {
        let c = charts.get(tag);
        if (!c) {
          const el = chartBox({ 'data-tag': tag });
          box.append(el);
          c = { el, chart: chart(el, { title: tag, xLabel: 'step', yLabel: tag, integerX: true }) };
          charts.set(tag, c);
        }
        c.chart.update(series);
      }
      return more(isTerminal(job.state));
    },
    REFRESH_MS,
    signal,
    ctx.setError,
  );
}
