/**
 * Superposed: Show Drafts, its pure part: the k drafts of a completion answer as quick-pick
 * entries. No `vscode` import, so node's test runner tests it directly.
 *
 * The drafts come from a `textDocument/completion` request (Invoked) rather than the last inline
 * answer: the completion items carry each draft's score in their detail, and the request is for
 * where the cursor is now. The server answers it from the drafts it just showed as ghost text
 * when the user has only typed along them (its typing cache), so it decodes again only elsewhere.
 */

/** The parts of an LSP completion item the picks read. */
export interface DraftItem {
  label: string;
  detail?: string;
  insertText?: string;
  textEdit?: { newText: string };
  command?: { title?: string; command: string; arguments?: unknown[] };
}

export interface DraftPick {
  label: string; // the draft's first line with text
  description: string; // the server's detail: rank, score and source; the line count of a block
  detail: string; // the whole draft on one line: its lines trimmed, joined by ⏎
  text: string; // what picking inserts
  command?: DraftItem['command']; // the server's accept command (the user store learns it)
}

/** The draft an item inserts: the raw text in its accept command (the text edit may be an
 * escaped snippet), else its insert text, else its label. */
export function draftText(item: DraftItem): string {
  const argument = item.command?.arguments?.[0] as { text?: unknown } | undefined;
  if (typeof argument?.text === 'string') {
    return argument.text;
  }
  return item.insertText ?? item.textEdit?.newText ?? item.label;
}

/** The first line of `text` that holds more than blanks, trimmed. */
export function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? ''
  );
}

export function draftPicks(items: readonly DraftItem[]): DraftPick[] {
  return items
    .map((item) => ({ item, text: draftText(item) }))
    .filter(({ text }) => text.trim() !== '')
    .map(({ item, text }) => {
      const lines = text.replace(/^\n+/, '').split('\n').length;
      const block = lines > 1 ? ` · ${lines} lines` : '';
      return {
        label: firstLine(text),
        description: `${item.detail ?? ''}${block}`.trim(),
        detail: text
          .replace(/^\n+/, '')
          .split('\n')
          .map((line) => line.trim())
          .join(' ⏎ '),
        text,
        command: item.command,
      };
    });
}

/** Where the cursor ends after inserting `text` at (line, character). */
export function endOfInsert(
  line: number,
  character: number,
  text: string,
): { line: number; character: number } {
  const lines = text.split('\n');
  const last = lines[lines.length - 1];
  return lines.length === 1
    ? { line, character: character + last.length }
    : { line: line + lines.length - 1, character: last.length };
}
