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
  const lineBefore = document.lineAt(start.line).text.slice(0, start.character);
  const version = document.version;
  await vscode.commands.executeCommand(`editor.action.inlineSuggest.acceptNext${kind}`);
  if (document.version === version) {
    return; // nothing was shown, or nothing inserted
  }
  const inserted = document.getText(new vscode.Range(start, editor.selection.active));
  const uri = document.uri.toString();
  const part = acceptedPart(answers.get(uri), lineBefore, inserted);
  if (part === undefined) {
    return;
  }
  try {
    await srv.execute('superposed.accept', { uri, context: lineBefore, text: part });
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
