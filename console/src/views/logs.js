// A job's log: every replica followed in one streamed response (alt=sse:
// each line as it is written) until the job ended, in a virtualised list.
// The job's header is refreshed beside it.
import { apiStream, isAbort, saveBlob, withQuery } from '../api.js';
import { h, presence, text } from '../dom.js';
import { taskTag } from '../format.js';
import { LogStore, VirtualList } from '../loglist.js';
import { poll } from '../poll.js';

const JOB_REFRESH_MS = 5000;

export function mount(root, ctx) {
  const { signal } = ctx;
  const store = new LogStore();
  const count = h('span', { id: 'log-count', class: 'muted', 'aria-live': 'off' }, '0 lines');
  const follow = h('input', { id: 'log-follow', type: 'checkbox', checked: true });
  const filterText = h('input', {
    id: 'log-filter-text',
    type: 'search',
    placeholder: 'Filter lines',
    autocomplete: 'off',
    spellcheck: false,
  });
  const filterReplica = h('select', { id: 'log-filter-replica' }, h('option', { value: '' }, 'All replicas'));
  const firstError = h('button', { id: 'log-first-error', type: 'button', class: 'btn' }, 'First error');
  const download = h('button', { id: 'log-download', type: 'button', class: 'btn' }, 'Download');
  const ended = presence(h('p', { id: 'log-ended', class: 'muted' }, 'The job has ended; this is the whole log.'));
  const status = h('span', { class: 'muted', role: 'status' });
  const view = h('div', {
    id: 'log-view',
    class: 'log-view',
    tabindex: '0',
    role: 'log',
    'aria-label': 'Log lines',
  });

  root.append(
    h(
      'div',
      { class: 'log-toolbar' },
      h('div', { class: 'field' }, h('label', { for: 'log-filter-replica' }, 'Replica'), filterReplica),
      h('div', { class: 'field grow' }, h('label', { for: 'log-filter-text' }, 'Text'), filterText),
      h('label', { class: 'check' }, follow, ' Follow'),
      firstError,
      download,
      count,
    ),
    view,
    h('div', { class: 'log-foot' }, ended.node, status),
  );

  // Counts and the replica filter follow the store, once per frame at most.
  const onRefresh = () => {
    const n = store.visible.length;
    const all = store.size;
    text(count, n === all ? `${all} line${all === 1 ? '' : 's'}` : `${n} of ${all} lines`);
    for (let i = filterReplica.options.length - 1; i < store.tasks.length; i++) {
      const t = store.tasks[i];
      filterReplica.append(h('option', { value: t }, `${t} [${taskTag(t)}]`));
    }
  };
  const list = new VirtualList(view, store, {
    onFollowChange: (on) => {
      follow.checked = on;
    },
    onRefresh,
  });
  signal.addEventListener('abort', () => list.destroy(), { once: true });

  follow.addEventListener('change', () => list.setFollow(follow.checked));
  let typing = 0;
  filterText.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(applyFilter, 150);
  });
  filterReplica.addEventListener('change', applyFilter);
  function applyFilter() {
    store.setFilter({ text: filterText.value, task: filterReplica.value });
    list.refresh();
  }

  firstError.addEventListener('click', () => {
    list.flush();
    let r = store.firstErrorRow();
    if (r < 0 && store.hasError()) {
      // Hidden by the filters: clear them to show it.
      filterText.value = '';
      filterReplica.value = '';
      store.setFilter({ text: '', task: '' });
      r = store.firstErrorRow();
    }
    if (r < 0) {
      text(status, 'No line on stderr so far.');
      return;
    }
    text(status, '');
    list.reveal(r);
    view.focus({ preventScroll: true });
  });

  download.addEventListener('click', () => {
    list.flush();
    saveBlob(new Blob([store.text()], { type: 'text/plain;charset=utf-8' }), `${ctx.jobId}.log`);
  });

  let pageToken = '';
  let jobEnded = false;
  // The stream; again from the last page where the server ends one before
  // the job has ended (it does after a while, to check access again).
  poll(
    async (ps) => {
      await apiStream(
        withQuery(`${ctx.path}/logs`, { alt: 'sse', pageToken }),
        (type, page) => {
          if (type) return; // a kind of event this console does not know
          ctx.clearError();
          const entries = page.entries || [];
          if (entries.length) list.push(entries);
          if (page.nextPageToken) pageToken = page.nextPageToken;
          if (page.jobEnded) jobEnded = true;
        },
        { signal: ps },
      );
      if (!jobEnded) return true;
      ended.show(true);
      await ctx.fetchJob(ps).catch((e) => {
        if (isAbort(e)) throw e;
      });
      return false;
    },
    0,
    signal,
    (e) => {
      ctx.setError(e);
    },
  );
  // The header's state, now and then, while the log is followed.
  poll(
    async (ps) => {
      if (jobEnded) return false;
      await ctx.fetchJob(ps);
      return !jobEnded;
    },
    JOB_REFRESH_MS,
    signal,
    (e) => {
      ctx.setError(e);
    },
  );
}
