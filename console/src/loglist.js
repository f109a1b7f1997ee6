// The log view's model and its virtualised list. Lines live in parallel
// arrays (never in the DOM); the list shows only the rows in view, from a
// fixed row height, and takes appends in batches once per animation frame.
import { taskTag } from './format.js';

// The rows [start, end) to render for a scroll position, with `overscan`
// extra rows above and below. Pure: unit-tested.
export function windowFor({ scrollTop, viewportHeight, rowHeight, total, overscan = 10 }) {
  if (total <= 0 || rowHeight <= 0) return { start: 0, end: 0 };
  const first = Math.floor(Math.max(0, scrollTop) / rowHeight);
  const visible = Math.ceil(Math.max(0, viewportHeight) / rowHeight) + 1;
  const start = Math.max(0, Math.min(first, total - 1) - overscan);
  const end = Math.min(total, first + visible + overscan);
  return { start, end: Math.max(start, end) };
}

// The scrollTop that brings row `index` into view (in the upper third), or
// the current one when it is in view already.
export function scrollTopFor({ index, scrollTop, viewportHeight, rowHeight }) {
  const top = index * rowHeight;
  if (top >= scrollTop && top + rowHeight <= scrollTop + viewportHeight) return scrollTop;
  return Math.max(0, top - Math.floor(viewportHeight / 3));
}

// All lines, and the indexes of those that pass the filter.
export class LogStore {
  constructor() {
    this.ts = [];
    this.task = [];
    this.stream = [];
    this.message = [];
    this.trial = [];
    this.tasks = []; // task names in order of first appearance
    this.taskIndex = new Map();
    this.visible = []; // indexes into the arrays, in order
    this.filterText = '';
    this.filterTask = '';
  }

  get size() {
    return this.message.length;
  }

  matches(i) {
    if (this.filterTask && this.task[i] !== this.filterTask) return false;
    if (this.filterText && !this.message[i].toLowerCase().includes(this.filterText)) return false;
    return true;
  }

  // Appends entries of the logs API; returns the names of tasks seen first.
  append(entries) {
    const fresh = [];
    for (const e of entries) {
      const i = this.message.length;
      const task = e.taskName || '';
      this.ts.push(e.timestamp || '');
      this.task.push(task);
      this.stream.push(e.stream === 'stderr' ? 'stderr' : 'stdout');
      this.message.push(e.message == null ? '' : String(e.message));
      this.trial.push(e.trialId || '');
      if (!this.taskIndex.has(task)) {
        this.taskIndex.set(task, this.tasks.length);
        this.tasks.push(task);
        fresh.push(task);
      }
      if (this.matches(i)) this.visible.push(i);
    }
    return fresh;
  }

  setFilter({ text = this.filterText, task = this.filterTask } = {}) {
    this.filterText = String(text).toLowerCase();
    this.filterTask = task;
    this.visible = [];
    for (let i = 0; i < this.message.length; i++) if (this.matches(i)) this.visible.push(i);
  }

  // Position in `visible` of the first stderr line, or -1.
  firstErrorRow() {
    for (let r = 0; r < this.visible.length; r++) if (this.stream[this.visible[r]] === 'stderr') return r;
    return -1;
  }

  hasError() {
    return this.stream.includes('stderr');
  }

  lineText(i) {
    return `${this.ts[i]} ${this.task[i]} ${this.message[i]}`;
  }

  // The whole log (every line, unfiltered) as text.
  text() {
    const out = new Array(this.message.length);
    for (let i = 0; i < out.length; i++) out[i] = this.lineText(i);
    return out.length ? `${out.join('\n')}\n` : '';
  }
}

export const PALETTE_SIZE = 8;

// The list in a scrollable element. `onFollowChange(bool)` is told when the
// user scrolls away from the bottom or back to it; `onRefresh()` after the
// store's lines or filter changed on screen.
export class VirtualList {
  constructor(viewport, store, { rowHeight = 20, onFollowChange = () => {}, onRefresh = () => {} } = {}) {
    this.viewport = viewport;
    this.store = store;
    this.rowHeight = rowHeight;
    this.onFollowChange = onFollowChange;
    this.onRefresh = onRefresh;
    this.follow = true;
    this.current = -1; // the store index marked .current
    this.pending = [];
    this.frame = 0;
    this.rows = []; // row elements in use, pooled
    this.spacer = document.createElement('div');
    this.spacer.className = 'log-spacer';
    this.viewport.append(this.spacer);
    this.lastScrollTop = 0;
    this.programmatic = false;
    this.onScroll = () => {
      if (this.programmatic) {
        this.programmatic = false;
      } else {
        const atBottom = this.atBottom();
        if (atBottom !== this.follow) {
          this.follow = atBottom;
          this.onFollowChange(atBottom);
        }
      }
      this.render();
    };
    this.viewport.addEventListener('scroll', this.onScroll, { passive: true });
    this.resizeObserver = new ResizeObserver(() => this.render());
    this.resizeObserver.observe(this.viewport);
  }

  destroy() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.viewport.removeEventListener('scroll', this.onScroll);
    this.resizeObserver.disconnect();
  }

  atBottom() {
    const v = this.viewport;
    return v.scrollHeight - v.scrollTop - v.clientHeight <= this.rowHeight;
  }

  // Queues entries; they reach the store and the screen on the next frame.
  push(entries) {
    if (!entries.length) return;
    for (const e of entries) this.pending.push(e);
    this.schedule();
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.frame = 0;
    if (this.pending.length) {
      const batch = this.pending;
      this.pending = [];
      this.store.append(batch);
    }
    this.refresh();
  }

  setFollow(on) {
    this.follow = on;
    if (on) this.refresh();
  }

  // After the store changed (appends, filters): sizes, sticks to the bottom
  // when following, and renders.
  refresh() {
    this.spacer.style.height = `${this.store.visible.length * this.rowHeight}px`;
    if (this.follow) this.scrollTo(this.viewport.scrollHeight);
    this.render();
    this.onRefresh();
  }

  scrollTo(top) {
    const max = Math.max(0, this.viewport.scrollHeight - this.viewport.clientHeight);
    const t = Math.min(Math.max(0, top), max);
    if (Math.abs(this.viewport.scrollTop - t) >= 1) {
      this.programmatic = true;
      this.viewport.scrollTop = t;
    }
  }

  // Scrolls to visible row `r` and marks its line .current.
  reveal(r) {
    this.current = this.store.visible[r];
    this.follow = false;
    this.onFollowChange(false);
    this.refresh();
    this.scrollTo(
      scrollTopFor({
        index: r,
        scrollTop: this.viewport.scrollTop,
        viewportHeight: this.viewport.clientHeight,
        rowHeight: this.rowHeight,
      }),
    );
    this.render();
  }

  makeRow() {
    const row = document.createElement('div');
    row.className = 'log-line';
    const tag = document.createElement('span');
    tag.className = 'log-tag';
    const ts = document.createElement('span');
    ts.className = 'log-ts';
    const msg = document.createElement('span');
    msg.className = 'log-msg';
    row.append(tag, ts, msg);
    return row;
  }

  render() {
    const s = this.store;
    const { start, end } = windowFor({
      scrollTop: this.viewport.scrollTop,
      viewportHeight: this.viewport.clientHeight,
      rowHeight: this.rowHeight,
      total: s.visible.length,
    });
    const n = end - start;
    while (this.rows.length < n) {
      const row = this.makeRow();
      this.rows.push(row);
      this.viewport.append(row);
    }
    while (this.rows.length > n) this.rows.pop().remove();
    for (let k = 0; k < n; k++) {
      const i = s.visible[start + k];
      const row = this.rows[k];
      const key = `${i}:${start + k}:${i === this.current}`;
      if (row.renderKey === key) continue;
      row.renderKey = key;
      const task = s.task[i];
      const stream = s.stream[i];
      row.dataset.task = task;
      row.dataset.stream = stream;
      row.className = `log-line task-color-${s.taskIndex.get(task) % PALETTE_SIZE}${stream === 'stderr' ? ' stderr' : ''}${i === this.current ? ' current' : ''}`;
      row.style.transform = `translateY(${(start + k) * this.rowHeight}px)`;
      const [tag, ts, msg] = row.children;
      tag.textContent = `[${taskTag(task)}${s.trial[i] ? ` t${s.trial[i]}` : ''}]`;
      // The time of day to the millisecond; the whole timestamp on hover.
      ts.textContent = s.ts[i].length >= 23 ? s.ts[i].slice(11, 23) : s.ts[i];
      ts.title = s.ts[i];
      msg.textContent = s.message[i];
    }
  }
}
