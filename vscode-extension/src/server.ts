/** The language client: starting superposed-lsp, its settings, state and commands. */
import * as vscode from 'vscode';
import {
  CompletionRequest,
  CompletionTriggerKind,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  NotificationType,
  type ServerOptions,
  State,
} from 'vscode-languageclient/node';

import { resolvePython, SECTION, serverCommand, serverSettings } from './config';
import { NEXT_EDITS_READY, NEXT_EDITS_REQUEST } from './nextEdits';
import { answers } from './partial';
import type { DraftItem } from './picks';
import { type ServerState, type ServerStatus, STATUS_NOTIFICATION, stateOfStatus } from './state';

type Listener = (state: ServerState) => void;

/** Sent where the cursor rests, so the server warms its cache there (LSP never says where the
 * cursor is; the server otherwise warms the end of a document it opens). */
const CURSOR_REST = new NotificationType<{
  textDocument: { uri: string };
  position: { line: number; character: number };
}>('superposed/cursorRest');
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

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly onState: Listener,
    private readonly isDisabled: (language: string) => boolean = () => false,
  ) {}

  async start(): Promise<void> {
    this.stats = undefined;
    const config = vscode.workspace.getConfiguration(SECTION);
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const python = resolvePython(
      config.get<string>('pythonPath'),
      await pythonExtensionInterpreter(),
      folder,
    );
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
      initializationOptions: currentSettings(),
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
          answers.set(document.uri.toString(), { line, drafts, row: position.line });
          return result;
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
    // The status bar follows the server's superposed/status; the work-done progress it also
    // reports (model load, indexing) is shown by the client's built-in progress feature.
    client.onNotification(new NotificationType<ServerStatus>(STATUS_NOTIFICATION), (status) =>
      this.onState(stateOfStatus(status, () => this.readyState())),
    );
    client.onNotification(new NotificationType<unknown>(NEXT_EDITS_READY), (params) =>
      this.onNextEdits?.(params),
    );
    client.onDidChangeState(({ newState }) => {
      if (newState === State.Stopped && this.client === client) {
        this.onState({ kind: 'error', message: 'The server stopped; see the log.' });
      }
    });
    this.client = client;
    this.onState({ kind: 'loading' });
    try {
      await client.start();
    } catch (err) {
      this.onState({ kind: 'error', message: `The server did not start: ${String(err)}` });
      throw err;
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client !== undefined && client.state !== State.Stopped) {
      await client.stop();
    }
    this.onState({ kind: 'stopped' });
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
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
