// The bucket browser: a project's buckets, and a bucket's objects as
// folders (prefix + delimiter) with paging and downloads.
import { api, apiBlob, enc, isAbort, saveBlob, withQuery } from '../api.js';
import { fill, h, scroller, table, text } from '../dom.js';
import { formatBytes, formatDate } from '../format.js';
import { loadProjects, projectSelect } from '../projects.js';
import { hashFor, replaceHash } from '../router.js';

// "a/b/c/" -> [{label: "a", prefix: "a/"}, {label: "b", prefix: "a/b/"}, ...]
export function crumbs(prefix) {
  const out = [];
  let acc = '';
  for (const part of String(prefix || '').split('/').filter((p) => p !== '')) {
    acc += `${part}/`;
    out.push({ label: part, prefix: acc });
  }
  return out;
}

export function listMount(root, ctx) {
  const { signal } = ctx;
  let project = ctx.query.project || '';
  const picker = projectSelect(project, (p) => {
    project = p;
    replaceHash(hashFor(['buckets'], { project }));
    load();
  });
  const { table: t, tbody } = table({ id: 'buckets-list', class: 'data' }, ['Bucket', 'Created', 'Location']);
  const empty = h('p', { class: 'empty', hidden: true }, 'This project has no bucket.');
  root.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Buckets')),
    h('form', { class: 'filters', onsubmit: (ev) => ev.preventDefault() }, h('div', { class: 'field' }, picker.nodes)),
    scroller(t),
    empty,
  );

  let generation = 0;
  async function load() {
    const gen = ++generation;
    try {
      const items = [];
      let pageToken = '';
      for (let i = 0; i < 50; i++) {
        const res = await api(withQuery('/storage/v1/b', { project, pageToken }), { signal });
        items.push(...(res.items || []));
        pageToken = res.nextPageToken || '';
        if (!pageToken) break;
      }
      if (gen !== generation) return;
      ctx.clearError();
      tbody.replaceChildren(
        ...items.map((b) =>
          h(
            'tr',
            { 'data-bucket': b.name },
            h('td', null, h('a', { href: hashFor(['buckets', b.name]) }, b.name)),
            h('td', null, formatDate(b.timeCreated)),
            h('td', null, b.location || ''),
          ),
        ),
      );
      empty.hidden = items.length > 0;
    } catch (e) {
      ctx.setError(e);
    }
  }

  (async () => {
    try {
      const projects = await loadProjects(signal);
      if (signal.aborted) return; // left the page while the list came: the address is no longer ours
      if (!project && projects.length) {
        project = projects[0].projectId;
        replaceHash(hashFor(['buckets'], { project }));
      }
      picker.setProjects(projects, project);
      if (project) load();
      else ctx.setError('You may read no project. Ask an operator for a role on one.');
    } catch (e) {
      ctx.setError(e);
    }
  })();
}

export function objectsMount(root, ctx) {
  const { signal } = ctx;
  const bucket = ctx.params.bucket;
  const s = { prefix: ctx.query.prefix || '', page: '', prev: [], next: '' };
  const crumbsNav = h('nav', { id: 'breadcrumbs', class: 'crumbs', 'aria-label': 'Folders' });
  const { table: t, tbody } = table({ id: 'objects-table', class: 'data' }, ['Name', 'Size', 'Updated', 'Type', '']);
  const empty = h('p', { class: 'empty', hidden: true }, 'Nothing here.');
  const prevBtn = h('button', { id: 'objects-prev', type: 'button', class: 'btn', disabled: true }, '← Previous');
  const nextBtn = h('button', { id: 'objects-next', type: 'button', class: 'btn', disabled: true }, 'Next →');
  const status = h('p', { class: 'muted', role: 'status' });
  root.append(
    h('div', { class: 'page-head' }, h('h1', null, `gs://${bucket}`)),
    crumbsNav,
    scroller(t),
    empty,
    h('div', { class: 'pager' }, prevBtn, nextBtn),
    status,
  );
  prevBtn.addEventListener('click', () => {
    s.page = s.prev.pop() || '';
    load();
  });
  nextBtn.addEventListener('click', () => {
    s.prev.push(s.page);
    s.page = s.next;
    load();
  });

  fill(
    crumbsNav,
    h('a', { href: hashFor(['buckets']) }, 'Buckets'),
    ' / ',
    h('a', { href: hashFor(['buckets', bucket]) }, bucket),
    crumbs(s.prefix).map((c) => [' / ', h('a', { href: hashFor(['buckets', bucket], { prefix: c.prefix }) }, c.label)]),
  );

  async function download(name, button) {
    button.disabled = true;
    text(status, `Downloading ${name}…`);
    try {
      const blob = await apiBlob(`/storage/v1/b/${enc(bucket)}/o/${enc(name)}?alt=media`, { signal });
      saveBlob(blob, name.split('/').pop() || 'object');
      text(status, `Downloaded ${name}.`);
    } catch (e) {
      if (isAbort(e)) return;
      text(status, '');
      ctx.setError(e);
    } finally {
      button.disabled = false;
    }
  }

  async function load() {
    try {
      const res = await api(
        withQuery(`/storage/v1/b/${enc(bucket)}/o`, { prefix: s.prefix, delimiter: '/', pageToken: s.page }),
        { signal },
      );
      ctx.clearError();
      const rows = [];
      for (const p of res.prefixes || []) {
        rows.push(
          h(
            'tr',
            { 'data-prefix': p },
            h('td', { class: 'name' }, h('a', { href: hashFor(['buckets', bucket], { prefix: p }) }, `${p.slice(s.prefix.length)}`)),
            h('td', null, 'folder'),
            h('td'),
            h('td'),
            h('td'),
          ),
        );
      }
      for (const o of res.items || []) {
        const btn = h('button', { type: 'button', class: 'btn btn-small download', 'aria-label': `Download ${o.name}` }, 'Download');
        btn.addEventListener('click', () => download(o.name, btn));
        rows.push(
          h(
            'tr',
            { 'data-object': o.name },
            h('td', { class: 'name' }, o.name.slice(s.prefix.length) || o.name),
            h('td', { class: 'num' }, formatBytes(o.size)),
            h('td', null, formatDate(o.updated)),
            h('td', null, o.contentType || ''),
            h('td', null, btn),
          ),
        );
      }
      tbody.replaceChildren(...rows);
      empty.hidden = rows.length > 0;
      s.next = res.nextPageToken || '';
      prevBtn.disabled = !s.page;
      nextBtn.disabled = !s.next;
    } catch (e) {
      ctx.setError(e);
    }
  }
  load();
}
