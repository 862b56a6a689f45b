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

/** What `WorkspaceConfiguration.inspect('pythonPath')` returns, every level a user can set. */
export interface InspectedPath extends Inspected {
  globalLocalValue?: unknown; // the User settings of a remote window (code-server, SSH)
  globalRemoteValue?: unknown; // its Remote/Machine settings
}

/**
 * `superposed.pythonPath` from whichever level holds it, the most specific first. VS Code
 * leaves a machine-scoped setting written in the User settings of a remote window out of
 * `get()` (code-server is one), though README step 3 puts it there.
 */
export function configuredPython(levels: InspectedPath | undefined): string | undefined {
  const values = [
    levels?.workspaceFolderValue,
    levels?.workspaceValue,
    levels?.globalRemoteValue,
    levels?.globalValue,
    levels?.globalLocalValue,
  ];
  return values.find((value): value is string => typeof value === 'string' && value.trim() !== '');
}

/** What a setup problem costs the user: the status bar's few words and what to do. */
export interface Problem {
  what: string;
  message: string;
}

/** The command that fixes an interpreter without the package, for every message. */
export const SETUP_FIX =
  'run `make setup` in the superposed-lsp checkout, then set `superposed.pythonPath` to its ' +
  '.venv/bin/python';

/**
 * Asked of the interpreter before the server starts (from `/`: a checkout in the current folder
 * would lend its source, not its dependencies): exits 0 when superposed-lsp is installed there,
 * else prints why and exits 3.
 */
export const INTERPRETER_CHECK = [
  'import importlib.metadata, importlib.util, sys',
  'try:',
  '    importlib.metadata.distribution("superposed-lsp")',
  '    found = importlib.util.find_spec("lsp_server.cli") is not None',
  'except importlib.metadata.PackageNotFoundError:',
  '    print("No module named \'lsp_server\'")',
  '    sys.exit(3)',
  'except ImportError as err:',
  '    print(err)',
  '    sys.exit(3)',
  'if not found:',
  '    print("No module named \'lsp_server.cli\'")',
  '    sys.exit(3)',
].join('\n');

/** How the check ran: the spawn error's code (ENOENT...), the exit code, what it printed. */
export interface CheckRun {
  errorCode?: string;
  exitCode?: number | null;
  timedOut?: boolean;
  output: string;
}

/** The problem the interpreter check found, or undefined (go ahead and start). A check that
 * timed out says nothing: the server's own start tells. */
export function interpreterProblem(python: string, run: CheckRun): Problem | undefined {
  if (run.errorCode === 'ENOENT') {
    return {
      what: 'Python not found',
      message:
        `The Python interpreter ${python} does not exist. Set \`superposed.pythonPath\` to the ` +
        `interpreter that has superposed-lsp installed (${SETUP_FIX}).`,
    };
  }
  if (run.errorCode === 'EACCES') {
    return {
      what: 'Python not found',
      message: `${python} cannot be run (not executable). Set \`superposed.pythonPath\` to a Python interpreter.`,
    };
  }
  if (run.timedOut || run.errorCode !== undefined || run.exitCode === 0) {
    return undefined;
  }
  const why = run.output.trim().split('\n').pop() ?? '';
  return {
    what: 'superposed-lsp not installed',
    message: `${python} has no superposed-lsp (${why || `exit code ${run.exitCode}`}): ${SETUP_FIX}.`,
  };
}

/** The log levels of a LogOutputChannel. */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

const PYTHON_LEVELS: Record<string, LogLevel> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  ERROR: 'error',
  CRITICAL: 'error',
};

/**
 * The level of one line the server wrote to stderr (lsp_server/cli.py's format:
 * `2026-12-06 08:00:00,123 WARNING name: message`). A line without one (a traceback's, a
 * message over several lines) keeps the level of the line before; Python's own complaints
 * before logging starts (`No module named ...`, a traceback) are errors.
 */
export function stderrLevel(line: string, previous: LogLevel | undefined): LogLevel {
  const match = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ([A-Z]+) /.exec(line);
  if (match !== null && match[1] in PYTHON_LEVELS) {
    return PYTHON_LEVELS[match[1]];
  }
  return line.startsWith('Traceback ') ? 'error' : (previous ?? 'error');
}

/** `n thing(s)` in words: "1 folder", "2 folders". */
export function plural(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

/** JSON with comments and trailing commas (a settings.json) as JSON.parse reads it. */
export function parseJsonc(text: string): unknown {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const end = /^"(?:[^"\\]|\\.)*"/.exec(text.slice(i));
      const literal = end === null ? text.slice(i) : end[0];
      out += literal;
      i += literal.length - 1;
    } else if (c === '/' && text[i + 1] === '/') {
      const newline = text.indexOf('\n', i);
      i = newline === -1 ? text.length : newline - 1;
    } else if (c === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      i = close === -1 ? text.length : close + 1;
    } else {
      out += c;
    }
  }
  return JSON.parse(out.replace(/,(\s*[}\]])/g, '$1'));
}
