/**
 * Partial accepts and the per-language toggle.
 *
 * vscode-languageclient 11 exposes no partial-accept callback for inline completions (VS Code's
 * `handleDidPartiallyAcceptCompletionItem` is a proposed API), and VS Code runs an item's command
 * only on a full accept. So Superposed's accept-next-word/line commands run VS Code's own, then
 * send what was inserted to the server's `superposed.accept`, as a full accept's command does.
 */
import * as vscode from 'vscode';

import { type Answered, acceptedPart, toggled } from './config';
import type { Server } from './server';

const DISABLED_KEY = 'superposed.disabledLanguages';

/** The last inline answer per document (set by the client's middleware). */
export const answers = new Map<string, Answered>();

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
  await vscode.commands.executeCommand(`editor.action.inlineSuggest.acceptNext${kind}`);
  if (document.version === version) {
    return; // nothing was shown, or nothing inserted
  }
  const inserted = document.getText(new vscode.Range(start, editor.selection.active));
  const part = acceptedPart(answered, lineBefore, inserted);
  if (part === undefined) {
    return;
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
