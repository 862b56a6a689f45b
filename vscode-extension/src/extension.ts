/** Superposed Completions: starts superposed-lsp and wires its commands and status bar. */
import * as vscode from 'vscode';

import {
  DETAILS_URI,
  DetailsView,
  forget,
  indexWorkspace,
  showDrafts,
  showError,
  showProblem,
  showStats,
  watchPythonInterpreter,
} from './commands';
import { needsRestart, SECTION, wantsServer } from './config';
import { NextEditsView } from './nextEditsView';
import { acceptPart, cycle, isDisabled, setDebugLog, toggleLanguage } from './partial';
import { Server } from './server';
import { type ServerState, statusView } from './state';

let server: Server | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('Superposed', { log: true });
  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  status.name = 'Superposed';
  status.command = 'superposed.showDetails';
  let current: ServerState = { kind: 'starting' };
  const details = new DetailsView(
    () => current,
    () => server?.lastStats,
  );
  const show = (state: ServerState): void => {
    current = state;
    const view = statusView(state);
    status.text = view.text;
    status.tooltip = view.tooltip;
    details.changed();
  };
  setDebugLog((line) => output.debug(line));
  let nextEdits: NextEditsView | undefined; // below: it needs the server, the server's state clears it
  const srv = new Server(
    output,
    (state) => {
      show(state);
      if (state.kind === 'stopped' || state.kind === 'error') {
        nextEdits?.clear(); // what a stopped server proposed cannot be accepted
      }
      if (state.kind === 'ready') {
        void refreshStats(); // loaded, or the compiled decode step came in: stats anew
      }
    },
    (language) => isDisabled(context, language),
    (problem) => showProblem(problem, output),
    context.globalStorageUri,
  );
  server = srv;
  const view = new NextEditsView(srv, output, context);
  nextEdits = view;
  srv.onNextEdits = (params) => view.ready(params);
  // The stats shown in the status bar's tooltip, fetched when ready and after each save.
  const refreshStats = async (): Promise<void> => {
    if (current.kind !== 'ready' && current.kind !== 'indexing') {
      return; // no server to ask
    }
    await srv.refreshStats();
    if (current.kind === 'ready') {
      show(srv.readyState());
    }
  };
  // The server starts with the first file in one of superposed.languages (see wantsServer).
  let started = false;
  const restart = async (): Promise<void> => {
    started = true;
    status.show();
    try {
      await srv.restart();
    } catch (err) {
      void showError(`Superposed: the server did not start (${String(err)}).`, output);
    }
  };
  const startFor = (documents: readonly vscode.TextDocument[]): void => {
    const languages = vscode.workspace.getConfiguration(SECTION).get<string[]>('languages', []);
    if (!started && documents.some((document) => wantsServer(languages, document))) {
      void restart();
    }
  };
  // Settings and interpreter changes restart a server that was started (running or not).
  const restartIfStarted = async (): Promise<void> => {
    if (started) {
      await restart();
    } else {
      startFor(vscode.workspace.textDocuments);
    }
  };

  context.subscriptions.push(
    output,
    status,
    view,
    vscode.workspace.registerTextDocumentContentProvider(DETAILS_URI.scheme, details),
    vscode.commands.registerCommand('superposed.index', () => indexWorkspace(srv, output)),
    vscode.commands.registerCommand('superposed.showDetails', async () => {
      await refreshStats();
      await details.show();
    }),
    vscode.commands.registerCommand('superposed.showNextDraft', () => cycle(1)),
    vscode.commands.registerCommand('superposed.showPreviousDraft', () => cycle(-1)),
    vscode.commands.registerCommand('superposed.restart', restart),
    vscode.commands.registerCommand('superposed.showLog', () => output.show(true)),
    vscode.commands.registerCommand('superposed.showStats', () => showStats(srv, output)),
    vscode.commands.registerCommand('superposed.showDrafts', () => showDrafts(srv, output)),
    vscode.commands.registerCommand('superposed.acceptNextWord', () =>
      acceptPart(srv, 'Word', output),
    ),
    vscode.commands.registerCommand('superposed.acceptNextLine', () =>
      acceptPart(srv, 'Line', output),
    ),
    vscode.commands.registerCommand('superposed.toggleLanguage', () => toggleLanguage(context)),
    vscode.commands.registerCommand('superposed.forgetFile', () => forget(srv, output, 'file')),
    vscode.commands.registerCommand('superposed.forgetUserStore', () =>
      forget(srv, output, 'user'),
    ),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      // pythonPath in User settings of a remote window changes no setting VS Code reports
      // (see config.configuredPython): the interpreter is compared on any change.
      if (needsRestart((section) => event.affectsConfiguration(section))) {
        await restartIfStarted();
      } else if (await srv.pythonChanged()) {
        await restartIfStarted();
      } else if (event.affectsConfiguration(SECTION)) {
        await srv.sendSettings();
      }
    }),
    // The server updates the stores on save, off its event loop: look a moment later.
    vscode.workspace.onDidSaveTextDocument(() => setTimeout(() => void refreshStats(), 2000)),
    vscode.workspace.onDidOpenTextDocument((document) => startFor([document])),
    vscode.window.onDidChangeTextEditorSelection((event) => srv.cursorMoved(event.textEditor)),
    // An editor brought to the front keeps its selection: the cursor arrives there all the same.
    vscode.window.onDidChangeActiveTextEditor((editor) => editor && srv.cursorMoved(editor)),
  );
  // Another interpreter in the Python extension: a new server if it is the one to use now
  // (pythonPath unset), also after a start that failed.
  await watchPythonInterpreter(context, async () => {
    if (await srv.pythonChanged()) {
      await restartIfStarted();
    }
  });
  startFor(vscode.workspace.textDocuments);
}

export async function deactivate(): Promise<void> {
  await server?.stop();
}
