/** The extension's commands: Index Workspace, Show Stats, Show Drafts, and the interpreter watch. */
import * as vscode from 'vscode';

import { plural, type Problem, SECTION } from './config';
import { draftPicks, endOfInsert } from './picks';
import { pythonExtensionInterpreter, type Server } from './server';
import { detailsText, formatStats, type ServerState } from './state';

export async function indexWorkspace(srv: Server, output: vscode.LogOutputChannel): Promise<void> {
  let result: { indexed?: unknown[]; error?: string | null } | null;
  try {
    result = (await srv.execute('superposed.indexWorkspace')) as typeof result;
  } catch (err) {
    void showError(`Superposed: indexing failed (${String(err)}).`, output);
    return;
  }
  output.info(`index: ${JSON.stringify(result)}`);
  if (result?.error) {
    void showError(`Superposed: indexing failed (${result.error}).`, output);
  } else {
    const folders = result?.indexed?.length ?? 0;
    void vscode.window.showInformationMessage(
      `Superposed: workspace indexed (${plural(folders, 'folder')}).`,
    );
  }
}

/** Erases the current file (or, without one, everything) from the stores: superposed.forget. */
export async function forget(
  srv: Server,
  output: vscode.LogOutputChannel,
  what: 'file' | 'user',
): Promise<void> {
  const uri = vscode.window.activeTextEditor?.document.uri;
  if (what === 'file' && uri?.scheme !== 'file') {
    void showError('Superposed: open the file to forget first.', output);
    return;
  }
  let result: { removed?: Record<string, number>; error?: string } | null;
  try {
    const args = what === 'file' ? [{ uri: uri?.toString() }] : [];
    result = (await srv.execute('superposed.forget', ...args)) as typeof result;
  } catch (err) {
    void showError(`Superposed: forgetting failed (${String(err)}).`, output);
    return;
  }
  output.info(`forget: ${JSON.stringify(result)}`);
  if (result?.error) {
    void showError(`Superposed: forgetting failed (${result.error}).`, output);
  } else {
    const files = Object.values(result?.removed ?? {}).reduce((a, b) => a + b, 0);
    void vscode.window.showInformationMessage(
      `Superposed: ${plural(files, 'stored file')} erased.`,
    );
  }
}

export async function showStats(srv: Server, output: vscode.LogOutputChannel): Promise<void> {
  const stats = await srv.refreshStats();
  if (stats === undefined) {
    void showError('Superposed: no stats (is the server running?).', output);
    return;
  }
  const lines = formatStats(stats);
  output.info(`stats:\n  ${lines.join('\n  ')}`);
  void vscode.window.showInformationMessage('Superposed stats', {
    modal: true,
    detail: lines.join('\n'),
  });
}

/**
 * Superposed: Show Drafts: the k drafts at the cursor in a quick pick (first line, the server's
 * rank and score, the whole draft); the one picked goes in at the cursor, and the server's accept
 * command runs with it as after an inline accept, so the user store learns it.
 */
export async function showDrafts(srv: Server, output: vscode.LogOutputChannel): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined) {
    void vscode.window.showInformationMessage('Superposed: open a file to see its drafts.');
    return;
  }
  const document = editor.document;
  const position = editor.selection.active;
  const version = document.version;
  let picks;
  try {
    picks = draftPicks(await srv.drafts(document, position));
  } catch (err) {
    void showError(`Superposed: no drafts (${String(err)}).`, output);
    return;
  }
  output.info(`show drafts: ${JSON.stringify(picks.map((pick) => pick.text))}`);
  if (picks.length === 0) {
    void vscode.window.showInformationMessage('Superposed: no drafts here.');
    return;
  }
  const picked = await vscode.window.showQuickPick(picks, {
    title: 'Superposed: drafts at the cursor',
    placeHolder: 'Pick a draft to insert it',
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (picked === undefined) {
    return;
  }
  if (document.version !== version || vscode.window.activeTextEditor !== editor) {
    void vscode.window.showInformationMessage('Superposed: the file changed; ask again.');
    return;
  }
  const inserted = await editor.edit((edit) => edit.insert(position, picked.text));
  if (!inserted) {
    return;
  }
  const end = endOfInsert(position.line, position.character, picked.text);
  const cursor = new vscode.Position(end.line, end.character);
  editor.selection = new vscode.Selection(cursor, cursor);
  output.info(`picked draft: ${JSON.stringify(picked.text)}`);
  if (picked.command !== undefined) {
    try {
      await srv.execute(picked.command.command, ...(picked.command.arguments ?? []));
    } catch (err) {
      output.info(`accept failed: ${String(err)}`);
    }
  }
}

/** A problem that keeps the server down, said once, with the way to its fix. */
export async function showProblem(
  problem: Problem,
  output: vscode.LogOutputChannel,
): Promise<void> {
  const settings = 'Open Settings';
  const setting = problem.message.includes('superposed.pythonPath');
  const choice = await vscode.window.showErrorMessage(
    `Superposed: ${problem.message}`,
    ...(setting ? [settings] : []),
    'Show Log',
  );
  if (choice === settings) {
    await vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.pythonPath`);
  } else if (choice === 'Show Log') {
    output.show(true);
  }
}

/** Superposed: Show Details: the state and every counter, in a read-only document. */
export const DETAILS_URI = vscode.Uri.parse('superposed-details:Superposed%20details.md');

export class DetailsView implements vscode.TextDocumentContentProvider {
  private readonly emitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.emitter.event;

  constructor(
    private readonly state: () => ServerState,
    private readonly stats: () => Record<string, unknown> | undefined,
  ) {}

  provideTextDocumentContent(): string {
    return detailsText(this.state(), this.stats());
  }

  /** The state or the counters changed: an open details document follows. */
  changed(): void {
    this.emitter.fire(DETAILS_URI);
  }

  async show(): Promise<void> {
    this.changed();
    const document = await vscode.workspace.openTextDocument(DETAILS_URI);
    await vscode.window.showTextDocument(document, { preview: true });
  }
}

export async function showError(message: string, output: vscode.LogOutputChannel): Promise<void> {
  const choice = await vscode.window.showErrorMessage(message, 'Show Log');
  if (choice === 'Show Log') {
    output.show(true);
  }
}

/** Calls `changed` when the Python extension's interpreter changes (the server's when
 * pythonPath is unset: `changed` compares). */
export async function watchPythonInterpreter(
  context: vscode.ExtensionContext,
  changed: () => Promise<void>,
): Promise<void> {
  const extension = vscode.extensions.getExtension('ms-python.python');
  if (extension === undefined || (await pythonExtensionInterpreter()) === undefined) {
    return;
  }
  const event = extension.exports?.environments?.onDidChangeActiveEnvironmentPath;
  if (typeof event === 'function') {
    context.subscriptions.push(event(() => void changed()));
  }
}
