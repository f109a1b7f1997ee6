// Paging through a list that refreshes itself (views/jobs.js, views/vertex.js).
// `s` is the view's state: its query fields and `page` (this page's token),
// `prev` (the tokens of the pages before it), `next` (the next page's, once
// known) and `generation` (counted up for each query, so that an answer to an
// older one is dropped). One poller per query: a new query aborts the old one
// (and its request). Its controls (Previous, the page number, Next) are
// made here; the view places `controls` and calls showPage(next) with each
// page it shows. Not unit-tested here: it only wires poll() (poll.test.mjs)
// to the view; the browser suite pages through both lists.
import { h, text } from './dom.js';
import { poll } from './poll.js';

export function listPager(s, { signal, syncUrl, load, setError, refreshMs }) {
  let pollController = null;

  function restart() {
    syncUrl();
    s.generation++;
    if (pollController) pollController.abort();
    pollController = new AbortController();
    const ps = AbortSignal.any ? AbortSignal.any([signal, pollController.signal]) : pollController.signal;
    if (!AbortSignal.any) signal.addEventListener('abort', () => pollController.abort(), { once: true });
    // The buttons stay as they are (a disabled button would drop the focus);
    // a second Next before the page came does nothing.
    s.next = '';
    poll(load, refreshMs, ps, setError);
  }

  function prevPage() {
    s.page = s.prev.length ? s.prev.pop() : '';
    restart();
  }

  function nextPage() {
    if (!s.next) return;
    s.prev.push(s.page);
    s.page = s.next;
    restart();
  }

  const prevBtn = h('button', { id: 'prev-page', type: 'button', class: 'btn', disabled: true, onclick: prevPage }, '← Previous');
  const nextBtn = h('button', { id: 'next-page', type: 'button', class: 'btn', disabled: true, onclick: nextPage }, 'Next →');
  const pageInfo = h('span', { class: 'page-info', 'aria-live': 'polite' });

  return {
    restart,
    // A new query (the fields of `patch`): from its first page; nothing
    // happens when no field changes.
    changed(patch) {
      if (Object.entries(patch).every(([k, v]) => s[k] === v)) return;
      Object.assign(s, patch);
      s.page = '';
      s.prev = [];
      restart();
    },
    controls: h('div', { class: 'pager' }, prevBtn, pageInfo, nextBtn),
    // The page on screen, `next` its next page's token ('' on the last).
    showPage(next) {
      prevBtn.disabled = !s.page && !s.prev.length;
      nextBtn.disabled = !next;
      // A page opened from an address has no known number.
      text(pageInfo, s.page && !s.prev.length ? '' : `Page ${s.prev.length + 1}`);
    },
  };
}
