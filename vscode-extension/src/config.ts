/**
 * The extension's pure logic: which settings go to the server, how the server is started,
 * what the status bar says. No `vscode` import, so node's test runner tests it directly.
 */
import * as os from 'node:os';
import * as path from 'node:path';

import manifest from '../package.json';

export const SECTION = 'superposed';

/** The extension's own settings; every other `superposed.*` setting is the server's. */
export const EXTENSION_KEYS: readonly string[] = ['pythonPath', 'languages', 'trace.server'];

/**
 * The settings the server parses, under the server's own names: package.json's
 * contributes.configuration is their one list (tests/test_vscode_manifest.py checks it
 * against the server's lsp_server/settings.py).
 */
export const SERVER_KEYS: readonly string[] = Object.keys(
  manifest.contributes.configuration.properties,
)
  .map((key) => key.slice(SECTION.length + 1))
  .filter((key) => !EXTENSION_KEYS.includes(key));

/**
 * Settings that need a new server process: the interpreter, what the model load reads, and the
 * languages (the language client's document selector is fixed when it starts).
 */
export const RESTART_KEYS = [
  'pythonPath',
  'languages',
  'model',
  'device',
  'dtype',
  'precision',
  'runner',
  'threads',
  'compile',
  'prefillCopy',
] as const;

/** What `WorkspaceConfiguration.inspect` returns, reduced to the levels a user can set. */
export interface Inspected {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/**
 * The settings the user set explicitly, as the flat object the server parses.
 * Unset keys are left out so the server's defaults apply (package.json repeats them as docs).
 */
export function serverSettings(
  inspect: (key: string) => Inspected | undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of SERVER_KEYS) {
    const levels = inspect(key);
    const value = levels?.workspaceFolderValue ?? levels?.workspaceValue ?? levels?.globalValue;
    if (value !== undefined) {
      out[key] = value;
    }
  }
  return out;
}

/**
 * Whether a document should start the server. The extension activates on a document of any
 * language (package.json: the generic `onLanguage` event), since `superposed.languages` is the
 * user's; it starts the server, which loads a model, only for a file in one of those languages.
 */
export function wantsServer(
  languages: readonly string[],
  document: { languageId: string; uri: { scheme: string } },
): boolean {
  return document.uri.scheme === 'file' && languages.includes(document.languageId);
}

/** Whether a configuration change (tested with `affectsConfiguration`) needs a restart. */
export function needsRestart(affects: (section: string) => boolean): boolean {
  return RESTART_KEYS.some((key) => affects(`${SECTION}.${key}`));
}

/** `~` and `${workspaceFolder}` expanded, as in VS Code's own path settings. */
export function expandPath(value: string, workspaceFolder: string | undefined): string {
  let out = value.trim();
  if (workspaceFolder !== undefined) {
    out = out.split('${workspaceFolder}').join(workspaceFolder);
  }
  if (out === '~' || out.startsWith('~/')) {
    out = path.join(os.homedir(), out.slice(1));
  }
  return out;
}

/**
 * The interpreter that runs the server: `superposed.pythonPath`, else the Python extension's
 * active interpreter, else python3 from PATH.
 */
export function resolvePython(
  configured: string | undefined,
  pythonExtension: string | undefined,
  workspaceFolder: string | undefined,
  platform: NodeJS.Platform = process.platform,
): string {
  if (configured !== undefined && configured.trim() !== '') {
    return expandPath(configured, workspaceFolder);
  }
  if (pythonExtension !== undefined && pythonExtension.trim() !== '') {
    return pythonExtension;
  }
  return platform === 'win32' ? 'python' : 'python3';
}

export interface ServerCommand {
  command: string;
  args: string[];
}

/** `python -m lsp_server.cli`: works wherever the package is importable, console script or not. */
export function serverCommand(python: string, extraArgs: readonly string[] = []): ServerCommand {
  return { command: python, args: ['-m', 'lsp_server.cli', ...extraArgs] };
}

/** The drafts of the last inline answer in a document, and the line before the cursor then. */
export interface Answered {
  line: string;
  drafts: string[];
  row?: number; // the cursor's line then (0-based): a block's partial accepts go past it
}

/**
 * The part of one of our drafts that a partial accept inserted, or undefined when the inserted
 * text is not the next part of any of them (another extension's suggestion, say).
 * `lineBefore` is the text before the cursor just before the accept, from the start of the
 * answer's line: that line plus what the user typed or accepted since (line breaks included,
 * when lines of a block were accepted one by one).
 */
export function acceptedPart(
  answered: Answered | undefined,
  lineBefore: string,
  inserted: string,
): string | undefined {
  if (answered === undefined || inserted === '' || !lineBefore.startsWith(answered.line)) {
    return undefined;
  }
  const since = lineBefore.slice(answered.line.length);
  return answered.drafts.some((draft) => draft.startsWith(since + inserted)) ? inserted : undefined;
}

/** The language ids after toggling `language`: removed if present, else added. */
export function toggled(disabled: readonly string[], language: string): string[] {
  return disabled.includes(language)
    ? disabled.filter((id) => id !== language)
    : [...disabled, language];
}
