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

/** Where an answer was asked: the cursor (0-based) in a version of the document. */
export interface Place {
  line: number;
  character: number;
  version: number;
}

function before(a: Place, b: Place): boolean {
  return a.line < b.line || (a.line === b.line && a.character < b.character);
}

/**
 * What an answer does to the draft followed: the index of the item to put first (undefined:
 * the order stays) and the draft on screen once VS Code shows it; `prior`: the draft on screen
 * before, `pending`: steps cycled VS Code did not ask anew for, `typedSince(prior)`: the text
 * that went in from `prior`'s place to `at`. Undefined for an answer with no drafts: VS Code
 * drops a cancelled request's (the client answers it null) and shows nothing for an empty one,
 * so the draft followed stays. After a partial accept the extension asks anew (hide, trigger),
 * which cancels VS Code's own request after the edit; where that empty answer came in first it
 * replaced the draft chosen, and the next answer showed draft 1.
 */
export function onAnswer(
  prior: Shown | undefined,
  at: Place,
  texts: readonly string[],
  typedSince: (prior: Shown) => string,
  pending: number,
): { first: number | undefined; shown: Shown } | undefined {
  if (texts.length === 0) {
    return undefined;
  }
  let order: number | undefined;
  let text: string | undefined;
  if (
    prior !== undefined &&
    prior.version === at.version &&
    prior.line === at.line &&
    prior.character === at.character
  ) {
    // Asked again where the drafts were shown (VS Code asks twice after an edit, and anew when
    // cycling): the draft on screen first, so that VS Code keeps it (it shows the first item
    // of a new answer), and VS Code's pending cycle moves from it.
    const index = texts.indexOf(prior.text);
    order = index === -1 ? undefined : index;
    text = cycled(distinct(first(texts, order)), prior.text, pending);
  } else if (prior !== undefined && before(prior, at)) {
    // Text went in since (a partial accept, typing along): the item that continues the draft
    // on screen first. A cycle VS Code did not ask anew for went through the list it had.
    const onScreen = cycled(prior.drafts, prior.text, pending) ?? prior.text;
    order = follow(texts, onScreen, typedSince(prior));
  }
  const drafts = distinct(first(texts, order));
  const { line, character, version } = at;
  return {
    first: order,
    shown: { line, character, version, drafts, text: text ?? drafts[0] ?? '' },
  };
}
