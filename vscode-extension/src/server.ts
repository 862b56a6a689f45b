/** The language client: starting superposed-lsp, its settings, state and commands. */
import { execFile } from 'node:child_process';

import * as vscode from 'vscode';
import {
  CloseAction,
  type CloseHandlerResult,
  CompletionRequest,
  CompletionTriggerKind,
  DidChangeConfigurationNotification,
  ErrorAction,
  type ErrorHandlerResult,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  NotificationType,
  type ServerOptions,
  State,
  type StaticFeature,
} from 'vscode-languageclient/node';

import {
  type CheckRun,
  configuredPython,
  INTERPRETER_CHECK,
  interpreterProblem,
  type LogLevel,
  parseJsonc,
  type Problem,
  resolvePython,
  SECTION,
  serverCommand,
  serverSettings,
  stderrLevel,
} from './config';
import { NEXT_EDITS_READY, NEXT_EDITS_REQUEST } from './nextEdits';
import { answered, draftsWhole } from './partial';
import type { DraftItem } from './picks';
import { type ServerState, type ServerStatus, STATUS_NOTIFICATION, stateOfStatus } from './state';

type Listener = (state: ServerState) => void;

/** How long the interpreter check may take (a cold Python on a loaded machine: seconds). */
const CHECK_TIMEOUT_MS = 30_000;
/** A server that stops by itself is restarted this many times within RESTART_WINDOW_MS. */
const RESTARTS = 2;
const RESTART_WINDOW_MS = 180_000;

/** Asks `python` whether superposed-lsp is installed in it (config.INTERPRETER_CHECK). */
export function checkInterpreter(python: string): Promise<CheckRun> {
  return new Promise((resolve) => {
    execFile(
      python,
      ['-c', INTERPRETER_CHECK],
      { cwd: '/', timeout: CHECK_TIMEOUT_MS, encoding: 'utf8' },
      (error, stdout, stderr) => {
        const err = error as (NodeJS.ErrnoException & { killed?: boolean }) | null;
        resolve({
          errorCode: typeof err?.code === 'string' ? err.code : undefined,
          exitCode: err === null ? 0 : typeof err.code === 'number' ? err.code : null,
          timedOut: err?.killed === true,
          output: `${stdout}${stderr}`,
        });
      },
    );
  });
}

/**
 * The server's work-done progress is not asked for: superposed/status carries the same
 * message and percent, and the status bar item shows them (one item, not two saying it
 * differently).
 */
const NO_PROGRESS: StaticFeature = {
  fillClientCapabilities: (capabilities) => {
    capabilities.window = { ...capabilities.window, workDoneProgress: false };
  },
  initialize: () => undefined,
  getState: () => ({ kind: 'static' }),
  clear: () => undefined,
};

/** Sent where the cursor rests, so the server warms its cache there (LSP never says where the
 * cursor is; the server otherwise warms the end of a document it opens). */
const CURSOR_REST = new NotificationType<{
  textDocument: { uri: string };
  position: { line: number; character: number };
}>('superposed/cursorRest');
/** Sent when an answer the server cut at its deadline (answerWithinMs) is whole: ask again. */
const DRAFTS_WHOLE = new NotificationType<{ textDocument: { uri: string } }>(
  'superposed/draftsWhole',
);
/** The cursor rests once it has not moved for this long (Neovim's CursorHold is 'updatetime'). */
export const REST_MS = 300;

/** The settings the server reads, from the current configuration. */
function currentSettings(): Record<string, unknown> {
  const config = vscode.workspace.getConfiguration(SECTION);
  return serverSettings((key) => config.inspect(key));
}

/** The Python extension's interpreter for the workspace, if that extension is installed. */
export async function pythonExtensionInterpreter(): Promise<string | undefined> {
  const extension = vscode.extensions.getExtension('ms-python.python');
  if (extension === undefined) {
    return undefined;
  }
  try {
    const api = extension.isActive ? extension.exports : await extension.activate();
    const active = api?.environments?.getActiveEnvironmentPath?.();
    const resolved = active ? await api.environments.resolveEnvironment(active) : undefined;
    return resolved?.executable?.uri?.fsPath ?? active?.path;
  } catch {
    return undefined;
  }
}

/** One running language client; `restart` replaces it with a new server process. */
export class Server {
  private client: LanguageClient | undefined;
  private stats: Record<string, unknown> | undefined;
  private restTimer: ReturnType<typeof setTimeout> | undefined;
  /** Where superposed/nextEditsReady goes (the next-edits view). */
  onNextEdits: ((params: unknown) => void) | undefined;

  private startedWith: string | undefined; // the interpreter of the last start
  private lastProblem: Problem | undefined;
  private restarts: number[] = []; // when the server was restarted after stopping by itself
  private crashRestart = false; // closed() restarts the server: its Stopped is a passage
  private running = false; // the current client got running (a crash then is worth a restart)
  private restarting: Promise<void> = Promise.resolve();

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly onState: Listener,
    private readonly isDisabled: (language: string) => boolean = () => false,
    private readonly onProblem: (problem: Problem) => unknown = () => undefined,
    private readonly globalStorage: vscode.Uri | undefined = undefined,
  ) {}

  /**
   * The interpreter to run the server with, read anew at every start: `superposed.pythonPath`
   * from whichever level holds it (User settings included: see configuredPython), else the
   * Python extension's, else python3.
   */
  async python(): Promise<string> {
    const config = vscode.workspace.getConfiguration(SECTION);
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const configured =
      configuredPython(config.inspect('pythonPath')) ?? (await this.userSettingsPython());
    return resolvePython(configured, await pythonExtensionInterpreter(), folder);
  }

  /** pythonPath as the User settings file has it, where VS Code left it out (see
   * configuredPython); the file is two folders above the extension's global storage. */
  private async userSettingsPython(): Promise<string | undefined> {
    if (this.globalStorage === undefined) {
      return undefined;
    }
    const file = vscode.Uri.joinPath(this.globalStorage, '..', '..', 'settings.json');
    try {
      const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(file));
      const settings = parseJsonc(text) as Record<string, unknown> | null;
      const value = settings?.[`${SECTION}.pythonPath`];
      return typeof value === 'string' && value.trim() !== '' ? value : undefined;
    } catch {
      return undefined; // no such file, or not JSON: the other levels decide
    }
  }

  /** Whether the interpreter now differs from the one the server was last started with. */
  async pythonChanged(): Promise<boolean> {
    return this.startedWith !== undefined && (await this.python()) !== this.startedWith;
  }

  async start(): Promise<void> {
    this.stats = undefined;
    this.lastProblem = undefined;
    this.onState({ kind: 'starting' });
    const config = vscode.workspace.getConfiguration(SECTION);
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const python = await this.python();
    this.startedWith = python;
    // Asked first, so that a missing interpreter or package is one message that says what to
    // do, not the client's crash loop ("crashed 5 times", -32097).
    const problem = interpreterProblem(python, await checkInterpreter(python));
    if (problem !== undefined) {
      this.output.error(problem.message);
      this.fail(problem);
      return;
    }
    const { command, args } = serverCommand(python);
    this.output.info(`starting: ${command} ${args.join(' ')}`);
    // No `transport`: stdio pipes, without the `--stdio` argument languageclient would add.
    const serverOptions: ServerOptions = {
      command,
      args,
      options: folder === undefined ? {} : { cwd: folder },
    };
    const languages = config.get<string[]>('languages', ['python']);
    const clientOptions: LanguageClientOptions = {
      documentSelector: languages.map((language) => ({ scheme: 'file', language })),
      outputChannel: this.output,
      // The server's stderr at the level its log line says (lsp_server/cli.py), not all errors.
      stdioOptions: {
        stdout: (input, output) => this.logLines(input, output, () => 'info'),
        stderr: (input, output) => this.logLines(input, output, stderrLevel),
      },
      initializationOptions: currentSettings(),
      errorHandler: {
        error: (_error, _message, count): ErrorHandlerResult => ({
          action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown,
          handled: true,
        }),
        closed: () => this.closed(),
      },
      middleware: {
        // VS Code shows the drafts as ghost text. A completion request per keystroke as well would
        // decode twice, and the newer request for the document cancels the older on the server.
        provideCompletionItem: () => undefined,
        // The log shows what the server suggested (Superposed: Show Log).
        provideInlineCompletionItems: async (document, position, context, token, next) => {
          if (this.isDisabled(document.languageId)) {
            return undefined; // Superposed: Toggle Completions for Language
          }
          const result = await next(document, position, context, token);
          const items = Array.isArray(result) ? result : (result?.items ?? []);
          const drafts = items.map((item) =>
            typeof item.insertText === 'string' ? item.insertText : item.insertText.value,
          );
          const file = vscode.workspace.asRelativePath(document.uri);
          const where = `${file}:${position.line + 1}:${position.character + 1}`;
          this.output.info(`drafts at ${where}: ${JSON.stringify(drafts)}`);
          const line = document.lineAt(position.line).text.slice(0, position.character);
          return answered(document, position, line, result);
        },
        workspace: {
          // Servers that pull settings get the same object as the push: the server's keys only.
          configuration: (params, token, next) => {
            if (params.items.every((item) => item.section === SECTION)) {
              return params.items.map(() => currentSettings());
            }
            return next(params, token);
          },
        },
      },
    };
    const client = new LanguageClient(SECTION, 'Superposed', serverOptions, clientOptions);
    client.registerFeature(NO_PROGRESS);
    // The status bar follows the server's superposed/status; the work-done progress it also
    // reports (model load, indexing) is shown by the client's built-in progress feature.
    client.onNotification(new NotificationType<ServerStatus>(STATUS_NOTIFICATION), (status) =>
      this.onState(stateOfStatus(status, () => this.readyState())),
    );
    client.onNotification(new NotificationType<unknown>(NEXT_EDITS_READY), (params) =>
      this.onNextEdits?.(params),
    );
    client.onNotification(DRAFTS_WHOLE, (params) =>
      draftsWhole(client.protocol2CodeConverter.asUri(params.textDocument.uri).toString(), (line) =>
        this.output.info(line),
      ),
    );
    this.running = false;
    client.onDidChangeState(({ newState }) => {
      this.running ||= newState === State.Running && this.client === client;
      if (newState !== State.Stopped) {
        this.crashRestart = false;
      } else if (this.crashRestart) {
        return; // on its way to a new process (closed): not stopped for good
      }
      if (newState === State.Stopped && this.client === client && this.lastProblem === undefined) {
        this.fail({
          what: 'server stopped',
          message:
            'The server stopped; the log says why (Superposed: Show Log). Superposed: Restart Server starts it again.',
        });
      }
    });
    this.client = client;
    this.onState({ kind: 'loading' });
    try {
      await client.start();
    } catch (err) {
      if (this.client === client && this.lastProblem === undefined) {
        this.fail({
          what: 'server did not start',
          message: `The server did not start (${String(err)}); the log says why (Superposed: Show Log).`,
        });
      }
    }
  }

  /** A problem that keeps the server down: the status bar says it, and one message. */
  private fail(problem: Problem): void {
    this.lastProblem = problem;
    this.onState({ kind: 'error', what: problem.what, message: problem.message });
    void this.onProblem(problem);
  }

  /** The connection closed: restarted a few times (a crash mid-session), then left down
   * with one message; never the client's own "crashed 5 times" storm. */
  private closed(): CloseHandlerResult {
    const now = Date.now();
    this.restarts = this.restarts.filter((time) => now - time < RESTART_WINDOW_MS);
    // A server that never got running would only fail again (and the client say so each time)
    if (this.running && this.restarts.length < RESTARTS) {
      this.restarts.push(now);
      this.crashRestart = true;
      this.output.warn('the server stopped; restarting it');
      return { action: CloseAction.Restart, handled: true };
    }
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  /** Each line of a server stream into the log at its level. */
  private logLines(
    input: NodeJS.ReadableStream,
    output: vscode.LogOutputChannel,
    levelOf: (line: string, previous: LogLevel | undefined) => LogLevel,
  ): void {
    let level: LogLevel | undefined;
    let rest = '';
    input.on('data', (chunk: Buffer | string) => {
      const lines = (rest + chunk.toString()).split(/\r?\n/);
      rest = lines.pop() ?? '';
      for (const line of lines) {
        level = levelOf(line, level);
        output[level](line);
      }
    });
  }

  /** Stops the client whatever its state (starting, running, failed to start). */
  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client !== undefined) {
      try {
        if (client.needsStop()) {
          await client.stop(2000);
        } else {
          await client.dispose(2000);
        }
      } catch (err) {
        this.output.info(`stopping the old client: ${String(err)}`);
      }
    }
    this.onState({ kind: 'stopped' });
  }

  /** A new server process from whatever state the client is in; restarts asked for while one
   * runs follow it, one after the other. */
  restart(): Promise<void> {
    // after a restart that failed too (start reports its problems itself)
    this.restarting = this.restarting
      .catch(() => undefined)
      .then(async () => {
        this.restarts = [];
        await this.stop();
        await this.start();
      });
    return this.restarting;
  }

  /** The cursor moved in `editor`: once it rests there for REST_MS, tell the server. */
  cursorMoved(editor: vscode.TextEditor): void {
    clearTimeout(this.restTimer);
    const client = this.client;
    const document = editor.document;
    if (client === undefined || !client.isRunning() || document.uri.scheme !== 'file') {
      return;
    }
    if (this.isDisabled(document.languageId)) {
      return;
    }
    this.restTimer = setTimeout(() => {
      const { line, character } = editor.selection.active;
      const uri = client.code2ProtocolConverter.asUri(document.uri);
      const file = vscode.workspace.asRelativePath(document.uri);
      this.output.info(`cursor rests at ${file}:${line + 1}:${character + 1}`);
      void client.sendNotification(CURSOR_REST, {
        textDocument: { uri },
        position: { line, character },
      });
    }, REST_MS);
  }

  /** Pushes the current settings (the ones that need no restart). */
  async sendSettings(): Promise<void> {
    await this.client?.sendNotification(DidChangeConfigurationNotification.type, {
      settings: { [SECTION]: currentSettings() },
    });
  }

  /** Runs one of the server's commands (superposed.indexWorkspace, superposed.stats). */
  async execute(command: string, ...args: unknown[]): Promise<unknown> {
    if (this.client === undefined || !this.client.isRunning()) {
      throw new Error('the Superposed server is not running (Superposed: Restart Server)');
    }
    return this.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
  }

  /** The server's drafts at `position`, as completion items (Superposed: Show Drafts). */
  async drafts(document: vscode.TextDocument, position: vscode.Position): Promise<DraftItem[]> {
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      throw new Error('the Superposed server is not running (Superposed: Restart Server)');
    }
    const result = await client.sendRequest(CompletionRequest.type, {
      textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri) },
      position: client.code2ProtocolConverter.asPosition(position),
      context: { triggerKind: CompletionTriggerKind.Invoked }, // asked for: the full k
    });
    return (Array.isArray(result) ? result : (result?.items ?? [])) as DraftItem[];
  }

  /** The server's next edits at `position` (superposed/nextEdits): `{edits: [...]}`. */
  async nextEdits(document: vscode.TextDocument, position: vscode.Position): Promise<unknown> {
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      throw new Error('the Superposed server is not running (Superposed: Restart Server)');
    }
    return client.sendRequest(NEXT_EDITS_REQUEST, {
      textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri) },
      position: client.code2ProtocolConverter.asPosition(position),
    });
  }

  /** The stats last fetched (Superposed: Show Details). */
  get lastStats(): Record<string, unknown> | undefined {
    return this.stats;
  }

  /** Fetches the store stats for the status bar; they stay as they were if the call fails. */
  async refreshStats(): Promise<Record<string, unknown> | undefined> {
    try {
      const stats = await this.execute('superposed.stats');
      if (stats !== null && typeof stats === 'object') {
        this.stats = stats as Record<string, unknown>;
      }
    } catch (err) {
      this.output.info(`stats failed: ${String(err)}`);
    }
    return this.stats;
  }

  /** Ready, with the model and k the server reports (the settings until it has). */
  readyState(): ServerState {
    const config = vscode.workspace.getConfiguration(SECTION);
    const stats = this.stats as { model?: unknown; settings?: { k?: unknown } } | undefined;
    return {
      kind: 'ready',
      model: typeof stats?.model === 'string' ? stats.model : config.get<string>('model', ''),
      k: typeof stats?.settings?.k === 'number' ? stats.settings.k : config.get<number>('k', 3),
      stats: this.stats,
    };
  }
}
