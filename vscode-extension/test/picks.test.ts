import assert from 'node:assert/strict';
import { test } from 'node:test';

import { draftPicks, draftText, endOfInsert, firstLine } from '../src/picks';

const accept = (text: string) => ({
  command: 'superposed.accept',
  arguments: [{ uri: 'file:///a.py', context: 'def f(a):', text }],
});

test('draftText: the raw draft in the accept command, not the escaped snippet', () => {
  const item = { label: 'x', textEdit: { newText: '\\$x' }, command: accept('$x') };
  assert.equal(draftText(item), '$x');
  assert.equal(draftText({ label: 'y', insertText: 'y + 1' }), 'y + 1');
  assert.equal(draftText({ label: 'z' }), 'z');
});

test('draftPicks: first line as the label, rank and score, the whole block as the detail', () => {
  const block = '\n    b = a * 2\n    return b';
  const picks = draftPicks([
    {
      label: 'b = a * 2⏎ return b',
      detail: 'superposed draft 1 (score 0.90)',
      command: accept(block),
    },
    { label: 'return a', detail: 'superposed draft 2 (score 0.50)', command: accept(' return a') },
    { label: '', detail: 'superposed draft 3 (score 0.10)', command: accept('  \n') },
  ]);
  assert.equal(picks.length, 2); // a blank draft is no pick
  assert.equal(picks[0].label, 'b = a * 2');
  assert.equal(picks[0].description, 'superposed draft 1 (score 0.90) · 2 lines');
  assert.equal(picks[0].detail, 'b = a * 2 ⏎ return b');
  assert.equal(picks[0].text, block);
  assert.deepEqual(picks[0].command, accept(block));
  assert.equal(picks[1].label, 'return a');
  assert.equal(picks[1].description, 'superposed draft 2 (score 0.50)');
  assert.equal(firstLine('\n\n  x\n  y'), 'x');
});

test('endOfInsert: after the last line of what went in', () => {
  assert.deepEqual(endOfInsert(3, 9, ' + 1'), { line: 3, character: 13 });
  assert.deepEqual(endOfInsert(3, 9, '\n    b = a\n    return b'), { line: 5, character: 12 });
});
