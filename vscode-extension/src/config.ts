/**
 * The extension's pure logic: which settings go to the server, how the server is started,
 * what the status bar says. No `vscode` import, so node's test runner tests it directly.
 */
import * as os from 'node:os';
import * as path from 'node:path';

export const SECTION = 'superposed';

/** The settings the server parses, under the server's own names. */
export const SERVER_KEYS = [
  'model',
  'device',
  'dtype',
  'precision',
  'runner',
  'threads',
  'compile',
  'k',
  'method',
  'maxNewTokens',
  'maxPromptTokens',
  'alpha',
  'mix',
  'memory',
  'memorySeed',
  'verify',
  'temperature',
  'lambdas',
  'orders',
  'codebaseDb',
  'userDb',
  'userStore',
  'userWeight',
  'indexOnSave',
  'lineMode',
] as const;

/** Settings that need a new server process: the interpreter, and what the model load reads. */
export const RESTART_KEYS = [
  'pythonPath',
  'model',
  'device',
  'dtype',
  'precision',
  'runner',
  'threads',
  'compile',
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
