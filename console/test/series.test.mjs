import { test } from 'node:test';
import assert from 'node:assert/strict';
import { alignSeries, bestSoFar, parallelLayout, trialObjective } from '../src/series.js';

test('best so far follows the goal and skips trials without a value', () => {
  assert.deepEqual(bestSoFar([0.5, 0.4, 0.7, null, 0.6, 0.9]), [0.5, 0.5, 0.7, 0.7, 0.7, 0.9]);
  assert.deepEqual(bestSoFar([0.5, 0.4, 0.7, null, 0.6, 0.1], 'MAXIMIZE'), [0.5, 0.5, 0.7, 0.7, 0.7, 0.7]);
  assert.deepEqual(bestSoFar([0.5, 0.4, 0.7, null, 0.6, 0.1], 'MINIMIZE'), [0.5, 0.4, 0.4, 0.4, 0.4, 0.1]);
  assert.deepEqual(bestSoFar([null, null, 3], 'MINIMIZE'), [null, null, 3]);
  assert.deepEqual(bestSoFar([]), []);
  assert.deepEqual(bestSoFar([-1, -5, NaN, -2], 'MAXIMIZE'), [-1, -1, -1, -1]);
});

test('series align on the union of their x values, sorted', () => {
  const d = alignSeries([
    { label: 'a', points: [[10, 1], [30, 3]] },
    { label: 'b', points: [[20, 2], [10, 5]] },
  ]);
  assert.deepEqual(d, [[10, 20, 30], [1, null, 3], [5, 2, null]]);
  // A lone series (a scatter) keeps points sharing an x.
  assert.deepEqual(alignSeries([{ label: 's', points: [[2, 1], [1, 4], [2, 3]] }]), [[1, 2, 2], [4, 1, 3]]);
});

test('parallel coordinates scale numbers to their range and spread categories', () => {
  const trials = [
    { trialId: '1', hyperparameters: { lr: '0.1', opt: 'adam' }, finalMetric: { objectiveValue: 0.5 } },
    { trialId: '2', hyperparameters: { lr: '0.3', opt: 'sgd' }, finalMetric: { objectiveValue: 0.9 } },
    { trialId: '3', hyperparameters: { lr: '0.2', opt: 'rms' } },
  ];
  const { axes, lines } = parallelLayout(trials, ['lr', 'opt']);
  assert.deepEqual(axes.map((a) => [a.name, a.kind]), [['lr', 'number'], ['opt', 'category'], ['objective', 'number']]);
  assert.deepEqual(axes[1].categories, ['adam', 'sgd', 'rms']);
  const near = (a, b) => a.every((x, i) => (x == null ? b[i] == null : Math.abs(x - b[i]) < 1e-9));
  assert.ok(near(lines[0].ys, [0, 0, 0]));
  assert.ok(near(lines[1].ys, [1, 0.5, 1]));
  assert.ok(near(lines[2].ys, [0.5, 1, null]));
  assert.equal(trialObjective(trials[2]), null);
  assert.equal(trialObjective({ finalMetric: { objectiveValue: '0.25' } }), 0.25);
});
