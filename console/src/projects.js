// The projects the signed-in user may read, and the project <select>.
import { api, withQuery } from './api.js';
import { fill, h } from './dom.js';

export async function loadProjects(signal) {
  const out = [];
  let pageToken = '';
  for (let i = 0; i < 100; i++) {
    const page = await api(withQuery('/v1/projects', { pageToken }), { signal });
    out.push(...(page.projects || []));
    pageToken = page.nextPageToken || '';
    if (!pageToken) break;
  }
  return out;
}

// The label and <select id="project">, shown at once with `current`;
// setProjects() fills in the list when it comes (keeping `current` even when
// it is not among them, so an address typed by hand still shows).
export function projectSelect(current, onChange) {
  const select = h('select', { id: 'project', onchange: () => onChange(select.value) });
  const setProjects = (projects, cur = select.value || current) => {
    const ids = projects.map((p) => p.projectId);
    if (cur && !ids.includes(cur)) ids.unshift(cur);
    fill(select, ids.map((id) => h('option', { value: id, selected: id === cur }, id)));
    if (cur) select.value = cur;
  };
  setProjects([]);
  return { nodes: [h('label', { for: 'project' }, 'Project'), select], select, setProjects };
}
