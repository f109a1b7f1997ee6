import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LogStore, scrollTopFor, windowFor } from '../src/loglist.js';

test('the window holds the rows in view plus overscan, clamped to the list', () => {
  const w = (scrollTop, total, viewportHeight = 200, overscan = 5) =>
    windowFor({ scrollTop, viewportHeight, rowHeight: 20, total, overscan });
  assert.deepEqual(w(0, 0), { start: 0, end: 0 });
  assert.deepEqual(w(0, 3), { start: 0, end: 3 });
  // 200 px show 10 rows, one more for a partial row, 5 below.
  assert.deepEqual(w(0, 100_000), { start: 0, end: 16 });
  // Scrolled to row 500: 5 above, 11 in view, 5 below.
  assert.deepEqual(w(500 * 20, 100_000), { start: 495, end: 516 });
  // Half a row scrolled still starts at the row shown in part.
  assert.deepEqual(w(500 * 20 + 10, 100_000), { start: 495, end: 516 });
  // At the bottom.
  assert.deepEqual(w(99_990 * 20, 100_000), { start: 99_985, end: 100_000 });
  // Past the end (the list shrank under a filter).
  assert.deepEqual(w(1e9, 50), { start: 44, end: 50 });
  assert.deepEqual(w(-40, 50), { start: 0, end: 16 });
});

test('the DOM never holds more than a screenful, however long the log', () => {
  for (const total of [10, 1_000, 100_000, 1_000_000]) {
    for (const scrollTop of [0, 1234, total * 10, total * 20]) {
      const { start, end } = windowFor({ scrollTop, viewportHeight: 600, rowHeight: 20, total, overscan: 10 });
      assert.ok(end - start <= 31 + 20, `${total} ${scrollTop}: ${start}..${end}`);
      assert.ok(start >= 0 && end <= total && start <= end);
    }
  }
});

test('revealing a row scrolls only when it is out of view', () => {
  const at = (index, scrollTop) => scrollTopFor({ index, scrollTop, viewportHeight: 300, rowHeight: 20 });
  assert.equal(at(5, 0), 0);
  assert.equal(at(14, 0), 0);
  assert.equal(at(15, 0), 200); // just below: into the upper third
  assert.equal(at(1000, 0), 20_000 - 100);
  assert.equal(at(0, 5000), 0);
});

function entries(n, f) {
  return Array.from({ length: n }, (_, i) => f(i));
}

test('the store keeps lines in arrays, tasks in first-seen order, and filters', () => {
  const s = new LogStore();
  const fresh = s.append(
    entries(6, (i) => ({
      timestamp: `2024-05-01T00:00:0${i}.000Z`,
      taskName: i % 2 ? 'worker-replica-0' : 'master-replica-0',
      stream: i === 4 ? 'stderr' : 'stdout',
      message: i === 4 ? 'Traceback: boom' : `step ${i}`,
    })),
  );
  assert.deepEqual(fresh, ['master-replica-0', 'worker-replica-0']);
  assert.equal(s.size, 6);
  assert.deepEqual(s.visible, [0, 1, 2, 3, 4, 5]);
  assert.equal(s.firstErrorRow(), 4);
  s.setFilter({ task: 'worker-replica-0' });
  assert.deepEqual(s.visible, [1, 3, 5]);
  assert.equal(s.firstErrorRow(), -1);
  assert.ok(s.hasError());
  s.setFilter({ task: '', text: 'STEP' });
  assert.deepEqual(s.visible, [0, 1, 2, 3, 5]);
  // Appends honour the filter in force.
  s.append([{ taskName: 'ps-replica-0', message: 'step 9' }, { taskName: 'ps-replica-0', message: 'other' }]);
  assert.deepEqual(s.visible, [0, 1, 2, 3, 5, 6]);
  assert.deepEqual(s.tasks, ['master-replica-0', 'worker-replica-0', 'ps-replica-0']);
  s.setFilter({ text: '' });
  assert.equal(s.visible.length, 8);
  const text = s.text();
  assert.equal(text.split('\n').length, 9);
  assert.match(text, /^2024-05-01T00:00:00.000Z master-replica-0 step 0\n/);
  assert.equal(new LogStore().text(), '');
});

test('the store takes 100,000 lines quickly', () => {
  const s = new LogStore();
  const t0 = performance.now();
  for (let b = 0; b < 100; b++) {
    s.append(entries(1000, (i) => ({ taskName: `worker-replica-${i % 8}`, stream: 'stdout', message: `line ${b * 1000 + i}` })));
  }
  s.setFilter({ text: 'line 9999' });
  const ms = performance.now() - t0;
  assert.equal(s.size, 100_000);
  assert.deepEqual(s.visible.length, 11); // 9999 and 99990..99999
  assert.ok(ms < 2000, `${ms} ms`);
});
