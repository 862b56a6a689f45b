/**
 * Partial accepts and the per-language toggle.
 *
 * vscode-languageclient 11 exposes no partial-accept callback for inline completions (VS Code's
 * `handleDidPartiallyAcceptCompletionItem` is a proposed API), and VS Code runs an item's command
 * only on a full accept. So Superposed's accept-next-word/line commands run VS Code's own, then
 * send what was inserted to the server's `superposed.accept`, as a full accept's command does.
 */
import * as vscode from 'vscode';

import { cycled, first, onAnswer, type Shown } from './chosen';
import { type Answered, acceptedPart, toggled } from './config';
import type { Server } from './server';

const DISABLED_KEY = 'superposed.disabledLanguages';
/** How long a cycle waits for VS Code's own new answer before it cycles the list it has. */
const CYCLE_WAIT_MS = 3000;

/** The last inline answer per document (set by the client's middleware). */
export const answers = new Map<string, Answered>();
/** The draft on screen per document (chosen.ts). */
const shown = new Map<string, Shown>();
/** Steps cycled (Alt+] +1, Alt+[ -1) whose answer VS Code has not asked for yet. */
let pendingCycle = 0;
let cycleTimer: ReturnType<typeof setTimeout> | undefined;
/** Where the draft followed is logged (debug level of the extension's log). */
let debugLog: ((line: string) => void) | undefined;

export function setDebugLog(log: (line: string) => void): void {
  debugLog = log;
}

type Result = vscode.InlineCompletionItem[] | vscode.InlineCompletionList | null | undefined;

function textOf(item: vscode.InlineCompletionItem): string {
  return typeof item.insertText === 'string' ? item.insertText : item.insertText.value;
}

/**
 * An inline answer at `position` (the client's middleware): remembered for partial accepts,
 * and, when text went in since the draft on screen was shown, the item that continues that
 * draft put first, so that VS Code shows it rather than draft 1.
 */
export function answered(
  document: vscode.TextDocument,
  position: vscode.Position,
  line: string,
  result: Result,
): Result {
  const uri = document.uri.toString();
  const items = Array.isArray(result) ? result : (result?.items ?? []);
  const at = { line: position.line, character: position.character, version: document.version };
  const typedSince = (prior: Shown): string =>
    document.getText(new vscode.Range(new vscode.Position(prior.line, prior.character), position));
  const next = onAnswer(shown.get(uri), at, items.map(textOf), typedSince, pendingCycle);
  if (next === undefined) {
    return result; // no drafts (a cancelled request): the draft followed and its cycle stay
  }
  const ordered = first(items, next.first);
  pendingCycle = 0;
  clearTimeout(cycleTimer);
  shown.set(uri, next.shown);
  debugLog?.(
    `draft on screen: ${JSON.stringify(next.shown.text)} of ${JSON.stringify(next.shown.drafts)}`,
  );
  answers.set(uri, { line, drafts: ordered.map(textOf), row: position.line });
  return Array.isArray(result) || result === null || result === undefined
    ? ordered
    : new vscode.InlineCompletionList(ordered);
}

/** The draft on screen in `uri` (a cycle VS Code did not ask anew for applied), and whether
 * it is its answer's first. */
function settleCycle(uri: string): { text: string; first: boolean } | undefined {
  const current = shown.get(uri);
  if (current === undefined) {
    return undefined;
  }
  current.text = cycled(current.drafts, current.text, pendingCycle) ?? current.text;
  pendingCycle = 0;
  clearTimeout(cycleTimer);
  return { text: current.text, first: current.text === current.drafts[0] };
}

/** Alt+] (+1) and Alt+[ (-1): VS Code's own cycling, followed here (chosen.ts). */
/** The server's superposed/draftsWhole: the drafts of an answer cut at its deadline (the
 * server's answerWithinMs) are whole now. Where the cursor still is where they were shown, in
 * the same version of the document, VS Code asks again (the server answers from its cache). */
export async function draftsWhole(uri: string, log: (line: string) => void): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const prior = shown.get(uri);
  if (editor === undefined || prior === undefined || editor.document.uri.toString() !== uri) {
    return;
  }
  const at = editor.selection.active;
  const where = `${vscode.workspace.asRelativePath(editor.document.uri)}:${at.line + 1}:${at.character + 1}`;
  if (
    editor.document.version !== prior.version ||
    !at.isEqual(new vscode.Position(prior.line, prior.character))
  ) {
    log(`drafts whole, not asked again: the cursor left ${where}`);
    return; // the next keystroke asks anyway
  }
  log(`drafts whole at ${where}: asked again`);
  // VS Code asks nothing while a suggestion shows: it drops the cut one and asks anew
  await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
  await vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
}

export async function cycle(delta: 1 | -1): Promise<void> {
  pendingCycle += delta;
  clearTimeout(cycleTimer);
  const uri = vscode.window.activeTextEditor?.document.uri.toString();
  // VS Code asks for the drafts anew (explicitly) before it moves; where it does not, the list
  // it has is cycled
  cycleTimer = setTimeout(() => {
    const current = uri === undefined ? undefined : shown.get(uri);
    if (current !== undefined) {
      current.text = cycled(current.drafts, current.text, pendingCycle) ?? current.text;
    }
    pendingCycle = 0;
  }, CYCLE_WAIT_MS);
  const command = delta > 0 ? 'showNext' : 'showPrevious';
  await vscode.commands.executeCommand(`editor.action.inlineSuggest.${command}`);
}

export async function acceptPart(
  srv: Server,
  kind: 'Word' | 'Line',
  output: vscode.LogOutputChannel,
): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined) {
    return;
  }
  const document = editor.document;
  const start = editor.selection.active;
  const uri = document.uri.toString();
  const answered = answers.get(uri);
  // From the start of the answer's line: a block's lines are accepted one after the other.
  const row = answered?.row !== undefined && answered.row <= start.line ? answered.row : start.line;
  const lineBefore = document.getText(new vscode.Range(new vscode.Position(row, 0), start));
  const version = document.version;
  const onScreen = settleCycle(uri);
  await vscode.commands.executeCommand(`editor.action.inlineSuggest.acceptNext${kind}`);
  if (document.version === version) {
    return; // nothing was shown, or nothing inserted
  }
  let inserted = document.getText(new vscode.Range(start, editor.selection.active));
  if (kind === 'Line' && inserted.trim() === '') {
    // A block shown after the end of the line starts with a line break, and VS Code's accept
    // stops after it: the line goes in with it, one line per key.
    await vscode.commands.executeCommand('editor.action.inlineSuggest.acceptNextLine');
    inserted = document.getText(new vscode.Range(start, editor.selection.active));
  }
  const part = acceptedPart(answered, lineBefore, inserted);
  if (part === undefined) {
    return;
  }
  if (onScreen !== undefined && !onScreen.first && inserted.length < onScreen.text.length) {
    // VS Code goes on with the first of the drafts it had that still fit, not with the one on
    // screen: it drops them and asks anew, and the answer has the chosen one first (answered)
    await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
    await vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
  }
  // The store learns the part after the start of the line it went into, as a full accept's.
  const context = lineBefore.slice(lineBefore.lastIndexOf('\n') + 1);
  try {
    await srv.execute('superposed.accept', { uri, context, text: part });
    output.info(`accepted part: ${JSON.stringify(part)}`);
  } catch (err) {
    output.info(`accept failed: ${String(err)}`);
  }
}

/** Whether completions are off for a language (Superposed: Toggle Completions for Language). */
export function isDisabled(context: vscode.ExtensionContext, language: string): boolean {
  return context.globalState.get<string[]>(DISABLED_KEY, []).includes(language);
}

export async function toggleLanguage(context: vscode.ExtensionContext): Promise<void> {
  const language = vscode.window.activeTextEditor?.document.languageId;
  if (language === undefined) {
    void vscode.window.showInformationMessage('Superposed: open a file to toggle its language.');
    return;
  }
  const disabled = toggled(context.globalState.get<string[]>(DISABLED_KEY, []), language);
  await context.globalState.update(DISABLED_KEY, disabled);
  const state = disabled.includes(language) ? 'off' : 'on';
  void vscode.window.showInformationMessage(`Superposed: completions ${state} for ${language}.`);
}
