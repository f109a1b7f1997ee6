// Hash routing: "#/jobs/P/J/logs?x=1" -> {name, params, query}. parseHash
// and the route table are pure; start() wires them to the window.

// Each route: the path's fixed words and :names, and the view it shows.
export const ROUTES = [
  { name: 'signin', path: ['signin'] },
  { name: 'jobs', path: ['jobs'] },
  { name: 'job', path: ['jobs', ':project', ':job'], tab: 'overview' },
  { name: 'job', path: ['jobs', ':project', ':job', 'logs'], tab: 'logs' },
  { name: 'job', path: ['jobs', ':project', ':job', 'metrics'], tab: 'metrics' },
  { name: 'job', path: ['jobs', ':project', ':job', 'trials'], tab: 'trials' },
  { name: 'vertex', path: ['vertex'] },
  // :kind is the collection: customJobs or hyperparameterTuningJobs.
  { name: 'vertexjob', path: ['vertex', ':project', ':region', ':kind', ':job'], tab: 'overview' },
  { name: 'vertexjob', path: ['vertex', ':project', ':region', ':kind', ':job', 'logs'], tab: 'logs' },
  { name: 'vertexjob', path: ['vertex', ':project', ':region', ':kind', ':job', 'metrics'], tab: 'metrics' },
  { name: 'vertexjob', path: ['vertex', ':project', ':region', ':kind', ':job', 'trials'], tab: 'trials' },
  { name: 'cluster', path: ['cluster'] },
  { name: 'buckets', path: ['buckets'] },
  { name: 'bucket', path: ['buckets', ':bucket'] },
];

export function parseHash(hash) {
  let s = String(hash || '').replace(/^#/, '');
  const qi = s.indexOf('?');
  const query = {};
  if (qi >= 0) {
    for (const [k, v] of new URLSearchParams(s.slice(qi + 1))) query[k] = v;
    s = s.slice(0, qi);
  }
  const parts = s
    .split('/')
    .filter((p) => p !== '')
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
  if (!parts.length) return { name: 'jobs', params: {}, query, tab: undefined };
  for (const r of ROUTES) {
    if (r.path.length !== parts.length) continue;
    const params = {};
    let ok = true;
    r.path.forEach((seg, i) => {
      if (seg.startsWith(':')) params[seg.slice(1)] = parts[i];
      else if (seg !== parts[i]) ok = false;
    });
    if (ok) return { name: r.name, params, query, tab: r.tab };
  }
  return { name: 'notfound', params: {}, query, tab: undefined };
}

// "#/a/b?k=v" from path parts (each encoded) and a query (empty values dropped).
export function hashFor(parts, query = {}) {
  const path = parts.map((p) => encodeURIComponent(p)).join('/');
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v != null && v !== '') q.set(k, String(v));
  const qs = q.toString();
  return `#/${path}${qs ? `?${qs}` : ''}`;
}

export const jobHash = (project, job, tab) => hashFor(['jobs', project, job, ...(tab && tab !== 'overview' ? [tab] : [])]);

// A Vertex AI job's page: #/vertex/PROJECT/REGION/customJobs/ID[/TAB].
export const vertexJobHash = (project, region, collection, job, tab) =>
  hashFor(['vertex', project, region, collection, job, ...(tab && tab !== 'overview' ? [tab] : [])]);

// Changes the address without a new history entry and without re-rendering
// the page (for filters and paging the page already shows).
export function replaceHash(hash) {
  if (location.hash !== hash) history.replaceState(history.state, '', hash);
}

export function navigate(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}

export function start(onRoute) {
  const go = () => onRoute(parseHash(location.hash));
  window.addEventListener('hashchange', go);
  go();
}
