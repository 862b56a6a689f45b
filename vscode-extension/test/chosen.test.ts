import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cycled, distinct, first, follow, onAnswer, type Shown } from '../src/chosen';

// The drafts of tests/e2e/test_vscode_chosen.py: the first and third share their first word.
const drafts = ['self.width + self.height', 'None', 'self.height * 2'];

test('after a word of draft 3 went in, the item that continues draft 3 is found', () => {
  const after = ['.width + self.height', '.height * 2'];
  assert.equal(follow(after, drafts[2], 'self'), 1);
  assert.equal(follow(after, drafts[0], 'self'), 0);
  // typing along the draft, the rest shortened by what was typed
  assert.equal(follow(['eight * 2', 'idth + self.height'], drafts[2], 'self.h'), 0);
  // an item that only begins the rest (a shorter answer), or goes past it
  assert.equal(follow(['.width', '.height'], drafts[2], 'self'), 1);
  assert.equal(follow(['.height * 2 + 1'], drafts[2], 'self'), 0);
});

test('nothing to follow: nothing typed, text that leaves the draft, the draft all typed', () => {
  assert.equal(follow(drafts, drafts[2], ''), undefined);
  assert.equal(follow(['.width'], drafts[2], 'selg'), undefined);
  assert.equal(follow(['x'], 'None', 'None'), undefined);
  assert.equal(follow(['.width + self.height'], drafts[2], 'self'), undefined);
});

test('cycling as VS Code does: from the shown draft, wrapping, from the first when unknown', () => {
  assert.equal(cycled(drafts, drafts[0], 1), drafts[1]);
  assert.equal(cycled(drafts, drafts[1], 1), drafts[2]);
  assert.equal(cycled(drafts, drafts[2], 1), drafts[0]);
  assert.equal(cycled(drafts, drafts[0], -1), drafts[2]);
  assert.equal(cycled(drafts, drafts[0], 2), drafts[2]);
  assert.equal(cycled(drafts, 'gone', 1), drafts[1]);
  assert.equal(cycled([], 'x', 1), undefined);
});

test('the followed item goes first, the others keep their order', () => {
  assert.deepEqual(first(['a', 'b', 'c'], 2), ['c', 'a', 'b']);
  assert.deepEqual(first(['a', 'b', 'c'], 0), ['a', 'b', 'c']);
  assert.deepEqual(first(['a', 'b'], undefined), ['a', 'b']);
  assert.deepEqual(distinct(['a', '', 'b', 'a']), ['a', 'b']);
});

// tests/e2e/test_vscode_chosen.py's steps: the drafts at `return ` (line 6, column 15, version
// 2), cycled to draft 3, its first word accepted (version 3, column 19).
const asked = { line: 6, character: 15, version: 2 };
const afterWord = { line: 6, character: 19, version: 3 };
const rest = ['.width + self.height', '.height * 2'];

function cycledToThird(): Shown {
  const shown = onAnswer(undefined, asked, drafts, () => '', 0)?.shown;
  assert.ok(shown !== undefined);
  return { ...shown, text: cycled(shown.drafts, shown.text, 2) ?? '' };
}

test('after a word of the draft cycled to, the answer there has that draft first', () => {
  const next = onAnswer(cycledToThird(), afterWord, rest, () => 'self', 0);
  assert.equal(next?.first, 1);
  assert.equal(next?.shown.text, '.height * 2');
  // VS Code asks again there (the extension's trigger): the draft on screen stays first
  const again = onAnswer(next?.shown, afterWord, rest, () => '', 0);
  assert.equal(again?.first, 1);
  assert.equal(again?.shown.text, '.height * 2');
});

test('an answer with no drafts (a cancelled request) leaves the draft followed as it was', () => {
  // Under load VS Code's own request after the accepted word is cancelled by the extension's
  // trigger and its empty answer comes first: the trigger's answer still follows draft 3.
  const shown = cycledToThird();
  assert.equal(
    onAnswer(shown, afterWord, [], () => 'self', 0),
    undefined,
  );
  const next = onAnswer(shown, afterWord, rest, () => 'self', 0);
  assert.equal(next?.first, 1);
  assert.equal(next?.shown.text, '.height * 2');
});
