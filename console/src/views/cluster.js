// The cluster: hosts with their GPUs and TPUs (simulated ones marked), what
// runs where, and the queue of each project; refreshed every 5 s.
import { api } from '../api.js';
import { h, scroller, table, text } from '../dom.js';
import { formatBytes } from '../format.js';
import { poll } from '../poll.js';
import { jobHash } from '../router.js';

const REFRESH_MS = 5000;

// 0 means the server does not account for it (a TPU host runs no replica;
// local memory is not scheduled): a dash, not "0".
export function cpusText(cpuMilli) {
  if (cpuMilli == null || cpuMilli === '') return '';
  const n = Number(cpuMilli) / 1000;
  if (n === 0) return '—';
  return Number.isFinite(n) ? String(+n.toFixed(2)) : '';
}

export function memoryText(memoryMib) {
  const n = Number(memoryMib);
  if (memoryMib == null || memoryMib === '' || !Number.isFinite(n)) return '';
  return n === 0 ? '—' : formatBytes(n * 1024 * 1024);
}

// [{index, model, type}] -> "2 × NVIDIA_TESLA_T4 (0, 1)", one part per type.
export function gpusText(gpus) {
  if (!gpus || !gpus.length) return '';
  const byType = new Map();
  for (const g of gpus) {
    const t = g.type || g.model || 'GPU';
    if (!byType.has(t)) byType.set(t, []);
    byType.get(t).push(g.index);
  }
  return [...byType].map(([t, idx]) => `${idx.length} × ${t} (${idx.join(', ')})`).join('; ');
}

export function mount(root, ctx) {
  const { signal } = ctx;
  const executor = h('span', { id: 'cluster-executor', class: 'badge badge-neutral' });
  const hosts = table({ id: 'cluster-hosts', class: 'data' }, ['Host', 'CPUs', 'Memory', 'GPUs', 'TPU', 'State', 'Runs']);
  const queues = table({ id: 'cluster-queues', class: 'data' }, ['Project', 'Queued', 'Running']);
  const note = h('p', { class: 'help' });
  root.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Cluster'), h('span', null, 'Executor: ', executor)),
    note,
    h('section', { class: 'card' }, h('h2', null, 'Hosts'), scroller(hosts.table)),
    h('section', { class: 'card' }, h('h2', null, 'Queues'), scroller(queues.table)),
  );

  function render(c) {
    text(executor, c.executor || '');
    text(
      note,
      c.executor === 'slurm'
        ? 'The nodes Slurm reports. Jobs run as Slurm jobs; other Slurm users’ work shows as hidden.'
        : 'Hosts of the local executor. TPU hosts marked simulated are declared in the configuration, not real TPUs.',
    );
    hosts.tbody.replaceChildren(
      ...(c.hosts || []).map((host) =>
        h(
          'tr',
          { 'data-host': host.name },
          h('td', { class: 'name' }, host.name),
          h('td', { class: 'num' }, cpusText(host.cpuMilli)),
          h('td', { class: 'num' }, memoryText(host.memoryMib)),
          h('td', null, gpusText(host.gpus)),
          h('td', null, host.tpuType ? `${host.tpuType}${host.simulated ? ' (simulated)' : ''}` : ''),
          h('td', null, host.state || ''),
          h('td', { class: 'runs' }, runsThere(host.replicas || [])),
        ),
      ),
    );
    if (!(c.hosts || []).length) hosts.tbody.append(h('tr', { class: 'empty-row' }, h('td', { colspan: 7 }, 'No host.')));
    queues.tbody.replaceChildren(
      ...(c.queues || []).map((q) =>
        h(
          'tr',
          { 'data-project': q.project },
          h('td', null, h('a', { href: `#/jobs?project=${encodeURIComponent(q.project)}` }, q.project)),
          h('td', { class: 'num queued' }, String(q.queued ?? 0)),
          h('td', { class: 'num running' }, String(q.running ?? 0)),
        ),
      ),
    );
    if (!(c.queues || []).length) queues.tbody.append(h('tr', { class: 'empty-row' }, h('td', { colspan: 3 }, 'No project has work.')));
  }

  function runsThere(replicas) {
    if (!replicas.length) return 'idle';
    const hidden = replicas.filter((r) => r.hidden).length;
    const shown = replicas.filter((r) => !r.hidden);
    const items = shown.map((r) =>
      h('li', null, h('a', { href: jobHash(r.project, r.jobId) }, `${r.project}/${r.jobId}`), ` ${r.taskName || ''}`),
    );
    if (hidden) items.push(h('li', { class: 'muted' }, `${hidden} replica${hidden === 1 ? '' : 's'} of jobs you may not see`));
    return h('ul', { class: 'plain' }, items);
  }

  poll(
    async (ps) => {
      render(await api('/mlengine/v1/cluster', { signal: ps }));
      ctx.clearError();
      return true;
    },
    REFRESH_MS,
    signal,
    ctx.setError,
  );
}
