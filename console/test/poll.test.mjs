import { test } from 'node:test';
import assert from 'node:assert/strict';
import { whileRunning } from '../src/poll.js';

test('whileRunning: on while the job runs, one more round after it ended, then off', () => {
  const more = whileRunning();
  assert.deepEqual([false, false, true, true, true].map((ended) => more(ended)), [true, true, true, false, false]);
});
