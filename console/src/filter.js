// The jobs page's filter controls as the list API's `filter` (gcloud style,
// see src/service/job_filter.h): terms joined with " AND ".

const PLAIN = /^[A-Za-z0-9_.\-*/@+]+$/;

// A value as one token of the filter grammar: bare when it has no special
// characters, else quoted with a quote it does not contain (the grammar has
// no escapes).
export function quoteValue(v) {
  const s = String(v);
  if (s !== '' && PLAIN.test(s) && !/^-/.test(s)) return s;
  if (!s.includes('"')) return `"${s}"`;
  if (!s.includes("'")) return `'${s}'`;
  throw new Error('A filter value cannot hold both kinds of quotes (" and \').');
}

// "team=vision" -> {key: "team", value: "vision"}; throws with a message the
// page shows when it is not KEY=VALUE.
export function parseLabel(text) {
  const t = String(text || '').trim();
  if (!t) return null;
  const i = t.indexOf('=');
  if (i <= 0) throw new Error(`Label filter "${t}" is not KEY=VALUE (e.g. team=vision).`);
  const key = t.slice(0, i).trim();
  if (!/^[A-Za-z0-9_\-]+$/.test(key)) throw new Error(`Label key "${key}" may hold only letters, digits, - and _.`);
  return { key, value: t.slice(i + 1).trim() };
}

// {state, label, q} -> the filter string ("" for no filter).
export function buildFilter({ state = '', label = '', q = '' } = {}) {
  const terms = [];
  if (state) terms.push(`state=${quoteValue(state)}`);
  const l = parseLabel(label);
  if (l) terms.push(`labels.${l.key}=${quoteValue(l.value)}`);
  const text = String(q || '').trim().replace(/\*+$/, '');
  if (text) terms.push(`jobId:${quoteValue(`${text}*`)}`);
  return terms.join(' AND ');
}

// The Vertex AI page's controls as customJobs.list's (and
// hyperparameterTuningJobs.list's) `filter` (AIP-160, the same grammar):
// {state: "JOB_STATE_FAILED", label: "team=vision", q: "census"} ->
// state=JOB_STATE_FAILED AND labels.team=vision AND display_name:census*
// (`:` matches the whole name or one of its words, without regard to case).
export function buildVertexFilter({ state = '', label = '', q = '' } = {}) {
  const terms = [];
  if (state) terms.push(`state=${quoteValue(state)}`);
  const l = parseLabel(label);
  if (l) terms.push(`labels.${l.key}=${quoteValue(l.value)}`);
  const text = String(q || '').trim().replace(/\*+$/, '');
  if (text) terms.push(`display_name:${quoteValue(`${text}*`)}`);
  return terms.join(' AND ');
}
