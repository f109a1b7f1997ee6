import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildFilter, parseLabel, quoteValue } from '../src/filter.js';

test('the filter joins the controls with AND, in the list API grammar', () => {
  const rows = [
    [{}, ''],
    [{ state: 'RUNNING' }, 'state=RUNNING'],
    [{ label: 'team=vision' }, 'labels.team=vision'],
    [{ q: 'census' }, 'jobId:census*'],
    [{ q: 'census*' }, 'jobId:census*'],
    [{ q: '  census_2 ' }, 'jobId:census_2*'],
    [{ state: 'FAILED', label: 'team=vision', q: 'rnn' }, 'state=FAILED AND labels.team=vision AND jobId:rnn*'],
    [{ label: ' env = dev ' }, 'labels.env=dev'],
    [{ label: 'owner=a b' }, 'labels.owner="a b"'],
    [{ label: 'k=' }, 'labels.k=""'],
    [{ label: 'k=say "hi"' }, `labels.k='say "hi"'`],
    [{ q: 'a(b' }, 'jobId:"a(b*"'],
  ];
  for (const [input, want] of rows) assert.equal(buildFilter(input), want, JSON.stringify(input));
});

test('a label that is not KEY=VALUE is refused with a message', () => {
  assert.equal(parseLabel(''), null);
  assert.throws(() => parseLabel('team'), /not KEY=VALUE/);
  assert.throws(() => parseLabel('=x'), /not KEY=VALUE/);
  assert.throws(() => parseLabel('a b=x'), /letters, digits/);
  assert.deepEqual(parseLabel('a=b=c'), { key: 'a', value: 'b=c' });
});

test('values are quoted only when needed, with a quote they do not contain', () => {
  assert.equal(quoteValue('RUNNING'), 'RUNNING');
  assert.equal(quoteValue('-x'), '"-x"');
  assert.equal(quoteValue('a:b'), '"a:b"');
  assert.equal(quoteValue(`it's`), `"it's"`);
  assert.throws(() => quoteValue(`"it's"`), /both kinds of quotes/);
});
