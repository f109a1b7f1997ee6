// Vertex AI's custom jobs or hyperparameter tuning jobs of a project and
// region: filters, server-side paging (a stack of page tokens for
// "previous"), and the current page refreshed every 2 s. As views/jobs.js,
// over customJobs.list / hyperparameterTuningJobs.list.
import { api, enc, withQuery } from '../api.js';
import { buildVertexFilter } from '../filter.js';
import { fill, h, presence, scroller, stateBadge, table, text } from '../dom.js';
import { formatDate, formatDuration, jobDuration, labelsText } from '../format.js';
import { filterInputs } from '../listfilters.js';
import { listPager } from '../pager.js';
import { loadProjects, projectSelect } from '../projects.js';
import { hashFor, replaceHash, vertexJobHash } from '../router.js';
import { DEFAULT_REGION, KINDS, REGIONS, VERTEX_STATES, isRegionName, jobIdOf, mlState, resourcesText } from '../vertex.js';

export const PAGE_SIZE = 50;
const REFRESH_MS = 2000;

// The list's address: #/vertex?project=P&region=R&kind=custom|tuning&state=..&label=..&q=..&page=..
export function vertexListHash(s) {
  return hashFor(['vertex'], {
    project: s.project,
    region: s.region && s.region !== DEFAULT_REGION ? s.region : '',
    kind: s.kind && s.kind !== 'custom' ? s.kind : '',
    state: s.state,
    label: s.label,
    q: s.q,
    pageSize: s.pageSize && s.pageSize !== PAGE_SIZE ? s.pageSize : '',
    page: s.page,
  });
}

export function mount(root, ctx) {
  const { signal } = ctx;
  const q = ctx.query;
  const size = Number.parseInt(q.pageSize, 10);
  const s = {
    project: q.project || '',
    region: q.region || DEFAULT_REGION,
    kind: KINDS[q.kind] ? q.kind : 'custom',
    state: VERTEX_STATES.includes(q.state) ? q.state : '',
    label: q.label || '',
    q: q.q || '',
    // The address may ask for another page size (1 to 1000; the API's limit).
    pageSize: size >= 1 && size <= 1000 ? size : PAGE_SIZE,
    page: q.page || '',
    prev: [], // page tokens of the pages before this one ("" = the first)
    next: '',
    generation: 0, // bumps when the query changes, so a stale answer is dropped
  };

  const projectBox = h('div', { class: 'field' });
  const regionInput = h('input', {
    id: 'region',
    type: 'text',
    value: s.region,
    autocomplete: 'off',
    spellcheck: false,
    placeholder: DEFAULT_REGION,
  });
  regionInput.setAttribute('list', 'region-list'); // a read-only property: h() would set it as one
  const regionList = h('datalist', { id: 'region-list' }, REGIONS.map((r) => h('option', { value: r })));
  const kindSelect = h(
    'select',
    { id: 'kind', onchange: () => changed({ kind: kindSelect.value }) },
    Object.entries(KINDS).map(([k, v]) => h('option', { value: k, selected: k === s.kind }, v.title)),
  );
  const { stateSelect, labelInput, searchInput, onType } = filterInputs(s, {
    states: VERTEX_STATES,
    searchPlaceholder: 'Display name or a word of it',
    changed: (patch) => changed(patch),
    signal,
    typed: () => ({ region: regionInput.value.trim() || DEFAULT_REGION }),
  });
  regionInput.addEventListener('input', onType);
  // A region picked from the list (or typed, then Enter or Tab) applies at once.
  regionInput.addEventListener('change', () => changed({ region: regionInput.value.trim() || DEFAULT_REGION }));

  const { changed, restart, controls, showPage } = listPager(s, {
    signal, syncUrl, load, setError: ctx.setError, refreshMs: REFRESH_MS });
  const { table: jobsTable, tbody } = table({ id: 'vertex-table', class: 'data' }, [
    'Job',
    'State',
    'Created',
    'Duration',
    'Runs on',
    'Labels',
  ]);
  const empty = presence(h('p', { id: 'vertex-empty', class: 'empty' }, 'No job matches.'));
  const updated = h('span', { class: 'updated muted', 'aria-live': 'off' });

  root.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Vertex AI'), updated),
    h(
      'p',
      { class: 'help' },
      "Custom jobs and hyperparameter tuning jobs created through Vertex AI's API (",
      h('code', null, 'mlengine ai custom-jobs'),
      ', ',
      h('code', null, 'mlengine ai hp-tuning-jobs'),
      ', or Google\'s clients). Jobs created through AI Platform\'s are under Jobs.',
    ),
    h(
      'form',
      { class: 'filters', role: 'search', onsubmit: (ev) => ev.preventDefault() },
      projectBox,
      h('div', { class: 'field' }, h('label', { for: 'region' }, 'Region'), regionInput, regionList),
      h('div', { class: 'field' }, h('label', { for: 'kind' }, 'Kind'), kindSelect),
      h('div', { class: 'field' }, h('label', { for: 'state-filter' }, 'State'), stateSelect),
      h('div', { class: 'field' }, h('label', { for: 'label-filter' }, 'Label'), labelInput),
      h('div', { class: 'field grow' }, h('label', { for: 'search' }, 'Display name'), searchInput),
    ),
    scroller(jobsTable),
    empty.node,
    controls,
  );

  function syncUrl() {
    replaceHash(vertexListHash(s));
  }

  async function load(ps) {
    if (!s.project) return false;
    let filter;
    try {
      if (!isRegionName(s.region)) throw new Error(`"${s.region}" is not a region's name (e.g. ${DEFAULT_REGION}).`);
      filter = buildVertexFilter(s);
    } catch (e) {
      ctx.setError(e);
      render([], '');
      return false;
    }
    const gen = s.generation;
    const kind = KINDS[s.kind];
    const res = await api(
      withQuery(`/v1/projects/${enc(s.project)}/locations/${enc(s.region)}/${kind.collection}`, {
        pageSize: s.pageSize,
        pageToken: s.page,
        filter,
      }),
      { signal: ps },
    );
    if (gen !== s.generation) return false;
    ctx.clearError();
    render(res[kind.collection] || [], res.nextPageToken || '', filter);
    return true;
  }

  // `filter`: the list's filter the rows answer, kept on the table
  // (data-filter, with data-kind and data-region) so whoever reads the page
  // knows which query it shows.
  function render(jobs, next, filter = '') {
    s.next = next;
    jobsTable.dataset.filter = filter;
    jobsTable.dataset.kind = s.kind;
    jobsTable.dataset.region = s.region;
    const now = Date.now();
    const ids = jobs.map((j) => jobIdOf(j.name));
    const existing = [...tbody.rows];
    const sameIds = existing.length === jobs.length && existing.every((tr, i) => tr.dataset.jobId === ids[i]);
    if (sameIds) {
      jobs.forEach((j, i) => updateRow(existing[i], j, now));
    } else {
      const frag = document.createDocumentFragment();
      jobs.forEach((j, i) => frag.append(makeRow(j, ids[i], now)));
      tbody.replaceChildren(frag);
    }
    empty.show(jobs.length === 0);
    showPage(next);
    text(updated, `Updated ${new Date(now).toLocaleTimeString()}`);
  }

  function makeRow(j, id, now) {
    const href = vertexJobHash(s.project, s.region, KINDS[s.kind].collection, id);
    const tr = h(
      'tr',
      { 'data-job-id': id },
      h(
        'td',
        { class: 'job-id' },
        h('a', { href }, j.displayName || id),
        h('div', { class: 'muted job-number' }, id),
      ),
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
    const link = c[0].firstChild;
    if (link.textContent !== (j.displayName || tr.dataset.jobId)) text(link, j.displayName || tr.dataset.jobId);
    if (c[1].textContent !== (j.state || 'UNKNOWN')) fill(c[1], stateBadge(j.state, {}, mlState(j.state)));
    text(c[2], formatDate(j.createTime));
    c[2].title = j.createTime || '';
    text(c[3], formatDuration(jobDuration(j, now)));
    text(c[4], resourcesText(j));
    text(c[5], labelsText(j.labels));
  }

  (async () => {
    const picker = projectSelect(s.project, (p) => changed({ project: p }));
    fill(projectBox, picker.nodes);
    if (s.project) restart();
    try {
      const projects = await loadProjects(signal);
      if (signal.aborted) return; // left the page while the list came
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
