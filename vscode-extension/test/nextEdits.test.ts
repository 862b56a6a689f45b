import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  atSite,
  editPicks,
  fresh,
  hintText,
  isInsert,
  type NextEdit,
  oneLine,
  parseEdits,
  siteAt,
  target,
  throughChange,
  throughChanges,
} from '../src/nextEdits';

const A = 'file:///w/a.py';
const B = 'file:///w/b.py';

function edit(
  id: string,
  line: number,
  character: number,
  oldText: string,
  newText: string,
  uri = A,
): NextEdit {
  return {
    id,
    textDocument: { uri, version: 3 },
    range: {
      start: { line, character },
      end: { line, character: character + oldText.length },
    },
    newText,
    oldText,
    origin: 'file',
    label: `rename ${oldText} -> ${newText}`,
  };
}

test('parseEdits: the well-formed edits, URIs normalized, a label where none came', () => {
  const good = edit('1', 4, 11, 'get_user', 'fetch_user', 'file:///w/my%20project/a.py');
  const params = {
    textDocument: { uri: A, version: 3 },
    edits: [
      good,
      { ...good, id: 2 }, // id not a string
      {
        ...good,
        id: '3',
        range: { start: { line: 4, character: 9 }, end: { line: 4, character: 2 } },
      },
      {
        ...good,
        id: '4',
        range: { start: { line: -1, character: 0 }, end: { line: 0, character: 0 } },
      },
      { ...good, id: '5', oldText: undefined },
      { ...good, id: '6', label: '' },
      null,
    ],
  };
  const edits = parseEdits(params, (uri) => uri.replace('%20', ' '));
  assert.deepEqual(
    edits.map((e) => e.id),
    ['1', '6'],
  );
  assert.equal(edits[0].textDocument.uri, 'file:///w/my project/a.py');
  assert.equal(edits[0].label, 'rename get_user -> fetch_user');
  assert.equal(edits[1].label, 'get_user -> fetch_user');
  // A dismissed edit stays out, whatever notification brings it again.
  assert.deepEqual(
    parseEdits(params, (uri) => uri, new Set(['1'])).map((e) => e.id),
    ['6'],
  );
  assert.deepEqual(
    parseEdits({ edits: 'no' }, (u) => u),
    [],
  );
  assert.deepEqual(
    parseEdits(null, (u) => u),
    [],
  );
});

test('fresh: an edit whose site text changed is dropped; one of a file not open is kept', () => {
  const lines = ['def get_user(uid):', '    return uid', 'a = get_user(1)', 'b = get_usr(2)'];
  const textAt = (uri: string, range: NextEdit['range']): string | undefined | null => {
    if (uri !== A) {
      return undefined;
    }
    const line = lines[range.start.line];
    return line === undefined ? null : line.slice(range.start.character, range.end.character);
  };
  const edits = [
    edit('kept', 2, 4, 'get_user', 'fetch_user'),
    edit('stale', 3, 4, 'get_user', 'fetch_user'), // the text there is get_usr( now
    edit('past the end', 9, 4, 'get_user', 'fetch_user'),
    edit('other file', 0, 0, 'get_user', 'fetch_user', B),
  ];
  assert.deepEqual(
    fresh(edits, textAt).map((e) => e.id),
    ['kept', 'other file'],
  );
});

test('siteAt and target: Tab accepts at a site, else jumps to the best one in this file', () => {
  const edits = [
    edit('other file', 1, 0, 'x', 'y', B),
    edit('best', 9, 4, 'get_user', 'fetch_user'),
    edit('second', 3, 4, 'get_user', 'fetch_user'),
  ];
  assert.equal(siteAt(edits, A, { line: 0, character: 0 }), undefined);
  assert.equal(target(edits, A, { line: 0, character: 0 })?.id, 'best');
  // At the best one's line: that one is accepted, and a jump goes to the other.
  assert.equal(siteAt(edits, A, { line: 9, character: 0 })?.id, 'best');
  assert.equal(target(edits, A, { line: 9, character: 30 })?.id, 'second');
  assert.equal(atSite(edits[0], A, { line: 1, character: 0 }), false); // another file's
  assert.equal(target(edits, 'file:///w/c.py', { line: 0, character: 0 }), undefined);
});

test('throughChange: edits after a change move with it, edits it touches go', () => {
  const later = edit('later', 5, 4, 'get_user', 'fetch_user');
  const sameLine = edit('same line', 2, 20, 'get_user', 'fetch_user');
  // get_user -> fetch_user at line 2, 4..12: two characters longer.
  const rename = {
    range: { start: { line: 2, character: 4 }, end: { line: 2, character: 12 } },
    text: 'fetch_user',
  };
  assert.deepEqual(throughChange(later, rename)?.range, later.range);
  assert.deepEqual(throughChange(sameLine, rename)?.range, {
    start: { line: 2, character: 22 },
    end: { line: 2, character: 30 },
  });
  // A line break typed before the site: one line down, the character counted from the break.
  const enter = {
    range: { start: { line: 2, character: 14 }, end: { line: 2, character: 14 } },
    text: '\n    ',
  };
  assert.deepEqual(throughChange(sameLine, enter)?.range, {
    start: { line: 3, character: 10 },
    end: { line: 3, character: 18 },
  });
  // Two lines deleted above: two lines up.
  const deleted = {
    range: { start: { line: 1, character: 0 }, end: { line: 3, character: 0 } },
    text: '',
  };
  assert.deepEqual(throughChange(later, deleted)?.range.start, { line: 3, character: 4 });
  // A change that overlaps the site, or ends right at its start (xget_user), drops it.
  const inside = {
    range: { start: { line: 5, character: 6 }, end: { line: 5, character: 7 } },
    text: 'T',
  };
  const before = {
    range: { start: { line: 5, character: 4 }, end: { line: 5, character: 4 } },
    text: 'x',
  };
  const after = {
    range: { start: { line: 5, character: 12 }, end: { line: 5, character: 12 } },
    text: 'x',
  };
  assert.equal(throughChange(later, inside), undefined);
  assert.equal(throughChange(later, before), undefined);
  assert.equal(throughChange(later, after), undefined);
  // Changes after the site leave it be.
  const below = {
    range: { start: { line: 7, character: 0 }, end: { line: 8, character: 0 } },
    text: '',
  };
  assert.deepEqual(throughChange(later, below)?.range, later.range);
  // Only the changed document's edits move.
  const other = edit('other', 5, 4, 'get_user', 'fetch_user', B);
  assert.deepEqual(
    throughChanges([later, other], A, [inside]).map((e) => e.id),
    ['other'],
  );
});

test('how an edit is shown: insert or replace, on one line, with what Tab does', () => {
  const insert = edit('i', 1, 10, '', ', None');
  const replace = edit('r', 1, 4, 'get_user', 'fetch_user');
  assert.equal(isInsert(insert), true);
  assert.equal(isInsert(replace), false);
  assert.equal(oneLine('a\n  b\r\nc'), 'a ⏎   b ⏎ c');
  assert.match(hintText(replace, false), /Tab to jump: rename get_user -> fetch_user/);
  assert.equal(hintText(replace, true), '  Tab to accept, Esc to dismiss');
  const picks = editPicks(
    [replace, { ...insert, origin: 'open', textDocument: { uri: B, version: null } }],
    (uri) => uri.slice('file:///w/'.length),
  );
  assert.deepEqual(
    picks.map((p) => [p.label, p.description, p.detail]),
    [
      ['rename get_user -> fetch_user', 'a.py:2:5 (file)', 'get_user -> fetch_user'],
      ['rename  -> , None', 'b.py:2:11 (open)', 'insert , None'],
    ],
  );
});
