// Charts: uPlot line and scatter charts sized to their box, and the
// parallel coordinates drawn on a canvas by our own code.
import uPlot from 'uplot';
import { h } from './dom.js';
import { alignSeries, parallelLayout } from './series.js';

// A neutral palette that stays apart in grey as well; series also differ by
// their legend label, never by colour alone.
export const COLORS = ['#1f6feb', '#d1242f', '#1a7f37', '#9a6700', '#8250df', '#0e7490', '#bf3989', '#57606a'];

const HEIGHT = 240;
// Tick spacings for an axis of whole numbers (steps, trial ids, categories).
const INTEGER_INCRS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 1e7, 1e8, 1e9];

function widthOf(el) {
  return Math.max(240, Math.floor(el.getBoundingClientRect().width || el.clientWidth || 600));
}

// A chart in `container` that follows its width. `opts`: title, xLabel,
// yLabel, scatter (points only, but for the series indexes in lineSeries),
// xValues (uPlot's axis values function), integerX (ticks on whole numbers only). A series with stepped: true is a
// stepped line. update(series) redraws with new data; the chart is rebuilt
// when the set of series changes.
export function chart(container, { title, xLabel, yLabel, scatter = false, lineSeries = [], xValues, integerX = false } = {}) {
  let plot = null;
  let labels = '';

  function build(series) {
    if (plot) plot.destroy();
    const opts = {
      title,
      width: widthOf(container),
      height: HEIGHT,
      scales: { x: { time: false } },
      axes: [
        { label: xLabel, values: xValues, incrs: integerX ? INTEGER_INCRS : undefined },
        { label: yLabel, size: 60 },
      ],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      series: [
        { label: xLabel },
        ...series.map((s, i) => {
          const color = s.color || COLORS[i % COLORS.length];
          const line = !scatter || lineSeries.includes(i);
          return {
            label: s.label,
            stroke: color,
            width: line ? 2 : 0,
            spanGaps: true,
            paths: line ? (s.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined) : () => null,
            // Lines show their points when sparse (uPlot's default); scatters always.
            points: line ? { size: 5, fill: color, stroke: color } : { show: true, size: 7, fill: color, stroke: color },
          };
        }),
      ],
    };
    plot = new uPlot(opts, alignSeries(series), container);
  }

  const resize = new ResizeObserver(() => {
    if (plot) plot.setSize({ width: widthOf(container), height: HEIGHT });
  });
  resize.observe(container);

  return {
    update(series) {
      const key = series.map((s) => s.label).join('\u0000');
      if (!plot || key !== labels) {
        labels = key;
        build(series);
      } else {
        plot.setData(alignSeries(series));
      }
    },
    destroy() {
      resize.disconnect();
      if (plot) plot.destroy();
      plot = null;
    },
  };
}

// Parallel coordinates of trials on a <canvas>: one vertical axis per
// parameter and the objective, one line per trial shaded by its objective
// (darker = better), the best trial drawn last and thickest.
export function parallelCoordinates(canvas, trials, paramNames, goal) {
  const { axes, lines } = parallelLayout(trials, paramNames);
  const dpr = window.devicePixelRatio || 1;
  const width = Math.max(300, Math.floor(canvas.parentElement.getBoundingClientRect().width || 600));
  const height = 280;
  canvas.width = width * dpr;
  canvas.height = height * dpr;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, width, height);
  const styles = getComputedStyle(canvas);
  const fg = styles.color || '#1f2328';
  const font = `12px ${styles.fontFamily || 'system-ui, sans-serif'}`;
  const padX = 50;
  const top = 46;
  const bottom = height - 30;
  const n = axes.length;
  const xOf = (k) => (n === 1 ? width / 2 : padX + (k * (width - 2 * padX)) / (n - 1));
  const yOf = (v) => bottom - v * (bottom - top);

  const objs = lines.map((l) => l.objective).filter((v) => v != null);
  const lo = Math.min(...objs);
  const hi = Math.max(...objs);
  const min = goal === 'MINIMIZE';
  const goodness = (v) => {
    if (v == null || !objs.length) return 0;
    const t = hi === lo ? 1 : (v - lo) / (hi - lo);
    return min ? 1 - t : t;
  };
  const sorted = [...lines].sort((a, b) => goodness(a.objective) - goodness(b.objective));
  sorted.forEach((l, idx) => {
    const best = idx === sorted.length - 1 && l.objective != null;
    const gd = goodness(l.objective);
    g.strokeStyle = l.objective == null ? 'rgba(120,120,120,0.35)' : `rgba(31,111,235,${0.2 + 0.8 * gd})`;
    g.lineWidth = best ? 3 : 1.25;
    g.setLineDash(l.objective == null ? [4, 4] : []);
    g.beginPath();
    let pen = false;
    l.ys.forEach((y, k) => {
      if (y == null) {
        pen = false;
        return;
      }
      if (pen) g.lineTo(xOf(k), yOf(y));
      else g.moveTo(xOf(k), yOf(y));
      pen = true;
    });
    g.stroke();
  });
  g.setLineDash([]);

  g.font = font;
  g.fillStyle = fg;
  g.strokeStyle = fg;
  g.lineWidth = 1;
  axes.forEach((a, k) => {
    const x = xOf(k);
    g.beginPath();
    g.moveTo(x, top);
    g.lineTo(x, bottom);
    g.stroke();
    g.textAlign = k === 0 ? 'left' : k === n - 1 ? 'right' : 'center';
    const tx = k === 0 ? x - 10 : k === n - 1 ? x + 10 : x;
    g.fillText(a.name, tx, top - 30);
    const fmt = (v) => (Math.abs(v) >= 1000 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(2) : String(+v.toFixed(4)));
    if (a.kind === 'number') {
      g.fillText(fmt(a.max), tx, top - 10);
      g.fillText(fmt(a.min), tx, bottom + 16);
    } else {
      a.categories.forEach((c, i) => {
        const y = a.categories.length === 1 ? 0.5 : i / (a.categories.length - 1);
        g.fillText(c, tx, yOf(y) + 4);
      });
    }
  });
  canvas.setAttribute('aria-label', `Parallel coordinates of ${lines.length} trials over ${axes.map((a) => a.name).join(', ')}`);
}

export function chartBox(attrs) {
  return h('div', { ...attrs, class: ['chart', attrs.class] });
}
