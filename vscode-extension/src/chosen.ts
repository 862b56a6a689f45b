/**
 * Which draft is on screen, so that the one the user chose stays chosen. Pure: no `vscode`.
 *
 * VS Code's API says neither which inline item is shown nor when the user cycles, and after a
 * partial accept or a typed character the next answer's first item is shown: the server's
 * typing cache answers what is left of the drafts in rank order, so draft 1 again. The
 * extension follows the draft itself: Alt+] and Alt+[ are its commands (cycled here, then VS
 * Code's own), and an answer after text was typed or accepted puts first the item that
 * continues the draft that was on screen (Neovim's plugin does the same: ghost.lua `follow`).
 */

/** The draft on screen in a document, and the answer it came from. */
export interface Shown {
  line: number; // where the answer was asked (0-based)
  character: number;
  version: number; // the document's version then
  drafts: string[]; // the answer's drafts as VS Code lists them: distinct, none empty
  text: string; // the one on screen
}

/** The drafts as VS Code cycles through them: the first of equal texts, no empty one. */
export function distinct(drafts: readonly string[]): string[] {
  return drafts.filter((draft, i) => draft !== '' && drafts.indexOf(draft) === i);
}

/**
 * The index of the draft that continues `text` once `typed` went in (a partial accept, or
 * typing along): the one that is exactly what is left of it, else one that begins as it does;
 * undefined when none does, or nothing was typed.
 */
export function follow(drafts: readonly string[], text: string, typed: string): number | undefined {
  if (typed === '' || !text.startsWith(typed) || text.length === typed.length) {
    return undefined;
  }
  const rest = text.slice(typed.length);
  const exact = drafts.indexOf(rest);
  if (exact !== -1) {
    return exact;
  }
  const near = drafts.findIndex(
    (draft) => draft !== '' && (rest.startsWith(draft) || draft.startsWith(rest)),
  );
  return near === -1 ? undefined : near;
}

/** The draft shown after cycling `delta` steps from `text` (VS Code: from the shown item's
 * place in the list, or from the first when it is not there). */
export function cycled(drafts: readonly string[], text: string, delta: number): string | undefined {
  const n = drafts.length;
  if (n === 0) {
    return undefined;
  }
  const at = Math.max(0, drafts.indexOf(text));
  return drafts[(((at + delta) % n) + n) % n];
}

/** `items` with the one at `index` moved first (the others in their order). */
export function first<T>(items: readonly T[], index: number | undefined): T[] {
  if (index === undefined || index <= 0 || index >= items.length) {
    return [...items];
  }
  return [items[index], ...items.slice(0, index), ...items.slice(index + 1)];
}
