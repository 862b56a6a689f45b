/** The extension's commands: Index Workspace, Show Stats, and the interpreter watch. */
import * as vscode from 'vscode';

import { SECTION } from './config';
import { pythonExtensionInterpreter, type Server } from './server';
import { formatStats } from './state';

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
      `Superposed: workspace indexed (${folders} folder(s)).`,
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
    void vscode.window.showInformationMessage(`Superposed: ${files} stored file(s) erased.`);
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

export async function showError(message: string, output: vscode.LogOutputChannel): Promise<void> {
  const choice = await vscode.window.showErrorMessage(message, 'Show Log');
  if (choice === 'Show Log') {
    output.show(true);
  }
}

/** Restarts the server when the Python extension's interpreter changes and pythonPath is unset. */
export async function watchPythonInterpreter(
  context: vscode.ExtensionContext,
  restart: () => Promise<void>,
): Promise<void> {
  const extension = vscode.extensions.getExtension('ms-python.python');
  if (extension === undefined || (await pythonExtensionInterpreter()) === undefined) {
    return;
  }
  const event = extension.exports?.environments?.onDidChangeActiveEnvironmentPath;
  if (typeof event === 'function') {
    context.subscriptions.push(
      event(() => {
        if (!vscode.workspace.getConfiguration(SECTION).get<string>('pythonPath')) {
          void restart();
        }
      }),
    );
  }
}
