// The jobs of a project: filters, server-side paging (a stack of page
// tokens for "previous"), and the current page refreshed every 2 s.
import { api, enc, withQuery } from '../api.js';
import { buildFilter } from '../filter.js';
import { fill, h, presence, scroller, stateBadge, table, text } from '../dom.js';
import { STATES, formatDate, formatDuration, jobDuration, labelsText, resourcesText } from '../format.js';
import { filterInputs } from '../listfilters.js';
import { listPager } from '../pager.js';
import { loadProjects, projectSelect } from '../projects.js';
import { hashFor, jobHash, replaceHash } from '../router.js';

export const PAGE_SIZE = 50;
const REFRESH_MS = 2000;

export function mount(root, ctx) {
  const { signal } = ctx;
  const q = ctx.query;
  const s = {
    project: q.project || '',
    state: STATES.includes(q.state) ? q.state : '',
    label: q.label || '',
    q: q.q || '',
    page: q.page || '',
    prev: [], // page tokens of the pages before this one ("" = the first)
    next: '',
    generation: 0, // bumps when the query changes, so a stale answer is dropped
    marked: false,
  };

  const projectBox = h('div', { class: 'field' });
  const { stateSelect, labelInput, searchInput } = filterInputs(s, {
    states: STATES,
    searchPlaceholder: 'Job id or prefix',
    changed: (patch) => changed(patch),
    signal,
  });

  const { changed, restart, controls, showPage } = listPager(s, {
    signal, syncUrl, load, setError: ctx.setError, refreshMs: REFRESH_MS });
  const { table: jobsTable, tbody } = table({ id: 'jobs-table', class: 'data' }, [
    'Job',
    'State',
    'Created',
    'Duration',
    'Resources',
    'Labels',
  ]);
  const empty = presence(h('p', { id: 'jobs-empty', class: 'empty' }, 'No job matches.'));
  const updated = h('span', { class: 'updated muted', 'aria-live': 'off' });

  root.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Jobs'), updated),
    h(
      'form',
      { class: 'filters', role: 'search', onsubmit: (ev) => ev.preventDefault() },
      projectBox,
      h('div', { class: 'field' }, h('label', { for: 'state-filter' }, 'State'), stateSelect),
      h('div', { class: 'field' }, h('label', { for: 'label-filter' }, 'Label'), labelInput),
      h('div', { class: 'field grow' }, h('label', { for: 'search' }, 'Search'), searchInput),
    ),
    scroller(jobsTable),
    empty.node,
    controls,
  );

  function syncUrl() {
    replaceHash(hashFor(['jobs'], { project: s.project, state: s.state, label: s.label, q: s.q, page: s.page }));
  }

  async function load(ps) {
    if (!s.project) return false;
    let filter;
    try {
      filter = buildFilter(s);
    } catch (e) {
      ctx.setError(e);
      render([], '');
      return false;
    }
    const gen = s.generation;
    const res = await api(
      withQuery(`/v1/projects/${enc(s.project)}/jobs`, { pageSize: PAGE_SIZE, pageToken: s.page, filter }),
      { signal: ps },
    );
    if (gen !== s.generation) return false;
    ctx.clearError();
    render(res.jobs || [], res.nextPageToken || '', filter);
    return true;
  }

  // `filter`: the jobs.list filter the rows answer, kept on the table
  // (data-filter) so whoever reads the page knows which query it shows.
  function render(jobs, next, filter = '') {
    s.next = next;
    jobsTable.dataset.filter = filter;
    const now = Date.now();
    const existing = [...tbody.rows];
    const sameIds = existing.length === jobs.length && existing.every((tr, i) => tr.dataset.jobId === jobs[i].jobId);
    if (sameIds) {
      jobs.forEach((j, i) => updateRow(existing[i], j, now));
    } else {
      const frag = document.createDocumentFragment();
      for (const j of jobs) frag.append(makeRow(j, now));
      tbody.replaceChildren(frag);
    }
    empty.show(jobs.length === 0);
    showPage(next);
    text(updated, `Updated ${new Date(now).toLocaleTimeString()}`);
    // For performance checks: when the first page of a query was on screen.
    if (!s.marked) {
      s.marked = true;
      performance.mark('mlengine:jobs-rendered');
    }
  }

  function makeRow(j, now) {
    const tr = h(
      'tr',
      { 'data-job-id': j.jobId },
      h('td', { class: 'job-id' }, h('a', { href: jobHash(s.project, j.jobId) }, j.jobId)),
      h('td', { class: 'state' }),
      h('td', { class: 'created' }),
      h('td', { class: 'duration num' }),
      h('td', { class: 'resources' }),
      h('td', { class: 'labels' }),
    );
    updateRow(tr, j, now);
    return tr;
  }

  function updateRow(tr, j, now) {
    const c = tr.cells;
    if (c[1].textContent !== (j.state || '')) fill(c[1], stateBadge(j.state));
    text(c[2], formatDate(j.createTime));
    c[2].title = j.createTime || '';
    text(c[3], formatDuration(jobDuration(j, now)));
    text(c[4], resourcesText(j.trainingInput));
    text(c[5], labelsText(j.labels));
  }

  (async () => {
    // The first page does not wait for the project list when the address names the project.
    const picker = projectSelect(s.project, (p) => changed({ project: p }));
    fill(projectBox, picker.nodes);
    if (s.project) restart();
    try {
      const projects = await loadProjects(signal);
      if (signal.aborted) return; // left the page while the list came: the address is no longer ours
      if (!s.project) {
        if (!projects.length) {
          ctx.setError('You may read no project. Ask an operator for a role on one.');
          empty.show(true);
          return;
        }
        s.project = projects[0].projectId;
        restart();
      }
      picker.setProjects(projects, s.project);
    } catch (e) {
      if (!signal.aborted) ctx.setError(e);
    }
  })();
}
