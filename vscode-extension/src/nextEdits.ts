/**
 * Next edits, their pure part: the protocol's shapes (lsp_server/next_edits/service.py), which
 * pending edits are still good, which one is next, and how each is shown. No `vscode` import, so
 * node's test runner tests it directly.
 *
 * After a change ends, the server sends `superposed/nextEditsReady` with the places where the same
 * rewrite applies next (best first). The editor shows them, jumps to them and applies the accepted
 * one itself, as a normal text edit; then it tells the server with `superposed.nextEditAccepted`
 * (or `superposed.nextEditDismissed` for Esc), which ranks by what the user took and left.
 */

export const NEXT_EDITS_READY = 'superposed/nextEditsReady';
export const NEXT_EDITS_REQUEST = 'superposed/nextEdits';
export const ACCEPTED_COMMAND = 'superposed.nextEditAccepted';
export const DISMISSED_COMMAND = 'superposed.nextEditDismissed';

/** An LSP position: UTF-16 code units, as VS Code counts them too. */
export interface Pos {
  line: number;
  character: number;
}

export interface Span {
  start: Pos;
  end: Pos;
}

export interface NextEdit {
  id: string;
  textDocument: { uri: string; version: number | null };
  range: Span;
  newText: string;
  oldText: string; // the text the range covered when proposed: struck through where it is replaced
  origin: 'file' | 'open' | 'workspace';
  label: string; // "rename get_user -> fetch_user"
}

/** One change of a document, as VS Code's content changes give it (the range before the change). */
export interface Change {
  range: Span;
  text: string;
}

function isPos(value: unknown): value is Pos {
  const pos = value as Pos | null;
  return (
    typeof pos === 'object' &&
    pos !== null &&
    Number.isInteger(pos.line) &&
    Number.isInteger(pos.character) &&
    pos.line >= 0 &&
    pos.character >= 0
  );
}

function isEdit(value: unknown): value is NextEdit {
  const edit = value as NextEdit | null;
  return (
    typeof edit === 'object' &&
    edit !== null &&
    typeof edit.id === 'string' &&
    typeof edit.textDocument?.uri === 'string' &&
    isPos(edit.range?.start) &&
    isPos(edit.range?.end) &&
    comparePos(edit.range.start, edit.range.end) <= 0 &&
    typeof edit.newText === 'string' &&
    typeof edit.oldText === 'string'
  );
}

/**
 * The well-formed edits of a notification's or a request's `edits`, their URIs in `normalize`'s
 * spelling (the server may spell a file's URI otherwise than VS Code: percent-encoding). What
 * does not fit the protocol is left out rather than shown half, and so are the edits the user
 * dismissed: proposals the server made before the dismissal reached it may still come.
 */
export function parseEdits(
  value: unknown,
  normalize: (uri: string) => string,
  dismissed: ReadonlySet<string> = new Set(),
): NextEdit[] {
  const edits = (value as { edits?: unknown } | null)?.edits;
  if (!Array.isArray(edits)) {
    return [];
  }
  const shown = edits.filter((edit): edit is NextEdit => isEdit(edit) && !dismissed.has(edit.id));
  return shown.map((edit) => ({
    ...edit,
    textDocument: { uri: normalize(edit.textDocument.uri), version: edit.textDocument.version },
    origin: edit.origin ?? 'file',
    label: typeof edit.label === 'string' && edit.label !== '' ? edit.label : describe(edit),
  }));
}

export function comparePos(a: Pos, b: Pos): number {
  return a.line === b.line ? a.character - b.character : a.line - b.line;
}

/** The edit only inserts (shown as ghost text), or replaces (the removed text struck through). */
export function isInsert(edit: NextEdit): boolean {
  return edit.oldText === '';
}

/**
 * The edits whose site still holds their old text. `textAt` reads a document's text in a range
 * (undefined where that document is not open, or the range is past its end: an edit of a file
 * that is not open is kept, and checked again when it is opened or listed).
 */
export function fresh(
  edits: readonly NextEdit[],
  textAt: (uri: string, range: Span) => string | undefined | null,
): NextEdit[] {
  return edits.filter((edit) => {
    const text = textAt(edit.textDocument.uri, edit.range);
    return text === undefined || text === edit.oldText;
  });
}

/** Whether the cursor `pos` in document `uri` is at the edit's site: on one of its lines. */
export function atSite(edit: NextEdit, uri: string, pos: Pos): boolean {
  return (
    edit.textDocument.uri === uri &&
    pos.line >= edit.range.start.line &&
    pos.line <= edit.range.end.line
  );
}

/** The pending edit the cursor is at (the best of them where several share the line). */
export function siteAt(edits: readonly NextEdit[], uri: string, pos: Pos): NextEdit | undefined {
  return edits.find((edit) => atSite(edit, uri, pos));
}

/**
 * Where Tab jumps: the best edit in the document the cursor is in, other than the one it is at.
 * Edits of other files are reached through the list (Superposed: List Next Edits), so that Tab
 * never jumps somewhere the editor shows no mark of.
 */
export function target(edits: readonly NextEdit[], uri: string, pos: Pos): NextEdit | undefined {
  return edits.find((edit) => edit.textDocument.uri === uri && !atSite(edit, uri, pos));
}

/** Where `pos` (before `change`) is after it. Only for positions that the change does not cover. */
function shifted(pos: Pos, change: Change): Pos {
  const { start, end } = change.range;
  if (comparePos(pos, end) < 0) {
    return pos;
  }
  const lines = change.text.split('\n');
  const lastLength = lines[lines.length - 1].length;
  const line = pos.line + (lines.length - 1) - (end.line - start.line);
  if (pos.line !== end.line) {
    return { line, character: pos.character };
  }
  const base = lines.length === 1 ? start.character + lastLength : lastLength;
  return { line, character: base + (pos.character - end.character) };
}

/**
 * The edit's range after `change`, or undefined when the change touches it (overlaps it, or ends
 * or starts right at it: `get_user` typed into `xget_user` is another site). The server proposes
 * again after the change; until then the other pending edits stay where their text went.
 */
export function throughChange(edit: NextEdit, change: Change): NextEdit | undefined {
  const { start, end } = edit.range;
  if (comparePos(change.range.end, start) >= 0 && comparePos(change.range.start, end) <= 0) {
    return undefined;
  }
  return { ...edit, range: { start: shifted(start, change), end: shifted(end, change) } };
}

/** The pending edits of document `uri` after its `changes` (applied in order, as VS Code gives them). */
export function throughChanges(
  edits: readonly NextEdit[],
  uri: string,
  changes: readonly Change[],
): NextEdit[] {
  return edits.flatMap((edit) => {
    if (edit.textDocument.uri !== uri) {
      return [edit];
    }
    let moved: NextEdit | undefined = edit;
    for (const change of changes) {
      moved = moved && throughChange(moved, change);
    }
    return moved === undefined ? [] : [moved];
  });
}

/** Text on one line, as a decoration's after-text shows it (it cannot break lines). */
export function oneLine(text: string): string {
  return text.replace(/\r?\n/g, ' ⏎ ');
}

/** A label for an edit that came without one: "a -> b". */
export function describe(edit: Pick<NextEdit, 'oldText' | 'newText'>): string {
  const old = oneLine(edit.oldText).trim();
  const neu = oneLine(edit.newText).trim();
  return old === '' ? `insert ${neu}` : `${old} -> ${neu}`;
}

/** The hint after the line of the next edit's site: what Tab does there (at the site, the
 * preview already shows what the edit does). */
export function hintText(edit: NextEdit, here: boolean): string {
  return here ? '  Tab to accept, Esc to dismiss' : `  Tab to jump: ${edit.label}`;
}

/** A Superposed: List Next Edits entry: the label, where it is, what it changes. */
export interface NextEditPick {
  label: string;
  description: string;
  detail: string;
  edit: NextEdit;
}

export function editPicks(
  edits: readonly NextEdit[],
  relativePath: (uri: string) => string,
): NextEditPick[] {
  return edits.map((edit) => ({
    label: edit.label,
    description: `${relativePath(edit.textDocument.uri)}:${edit.range.start.line + 1}:${edit.range.start.character + 1} (${edit.origin})`,
    detail: describe(edit),
    edit,
  }));
}
