// Pure data shaping for the charts (unit-tested): aligning series on one
// x axis, best-so-far of a tuning job, and the parallel coordinates layout.

// [{label, points: [[x, y], ...]}] -> uPlot's aligned data [xs, ys1, ys2...]
// (x sorted ascending, null where a series has no point at that x). A lone
// series keeps points that share an x (a scatter of trials).
export function alignSeries(series) {
  if (series.length === 1) {
    const pts = [...series[0].points].sort((a, b) => a[0] - b[0]);
    return [pts.map((p) => p[0]), pts.map((p) => p[1])];
  }
  const xs = [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const data = [xs];
  for (const s of series) {
    const ys = new Array(xs.length).fill(null);
    for (const [x, y] of s.points) ys[at.get(x)] = y;
    data.push(ys);
  }
  return data;
}

// The best objective so far at each position of `values` (null = no value
// yet at that trial). goal: "MAXIMIZE" (the default) or "MINIMIZE".
export function bestSoFar(values, goal = 'MAXIMIZE') {
  const min = goal === 'MINIMIZE';
  let best = null;
  return values.map((v) => {
    if (v != null && Number.isFinite(v) && (best == null || (min ? v < best : v > best))) best = v;
    return best;
  });
}

export function trialObjective(trial) {
  const v = trial.finalMetric && trial.finalMetric.objectiveValue;
  if (v == null) return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

// One axis per parameter plus the objective: numeric values scaled to 0..1
// over their range, categorical ones spread evenly in order of first
// appearance. Returns {axes: [{name, kind, min, max, categories}],
// lines: [{trialId, objective, ys: [0..1 or null per axis]}]}.
export function parallelLayout(trials, paramNames) {
  const names = [...paramNames, 'objective'];
  const raw = trials.map((t) => ({
    trialId: t.trialId,
    objective: trialObjective(t),
    values: names.map((n) => (n === 'objective' ? trialObjective(t) : t.hyperparameters ? t.hyperparameters[n] : undefined)),
  }));
  const axes = names.map((name, k) => {
    const vals = raw.map((r) => r.values[k]).filter((v) => v != null && v !== '');
    const numeric = vals.length > 0 && vals.every((v) => Number.isFinite(Number(v)));
    if (numeric) {
      const nums = vals.map(Number);
      return { name, kind: 'number', min: Math.min(...nums), max: Math.max(...nums) };
    }
    return { name, kind: 'category', categories: [...new Set(vals.map(String))] };
  });
  const lines = raw.map((r) => ({
    trialId: r.trialId,
    objective: r.objective,
    ys: r.values.map((v, k) => {
      const a = axes[k];
      if (v == null || v === '') return null;
      if (a.kind === 'number') return a.max === a.min ? 0.5 : (Number(v) - a.min) / (a.max - a.min);
      const i = a.categories.indexOf(String(v));
      return a.categories.length === 1 ? 0.5 : i / (a.categories.length - 1);
    }),
  }));
  return { axes, lines };
}
