import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';

import {
  acceptedPart,
  configuredPython,
  EXTENSION_KEYS,
  expandPath,
  type Inspected,
  interpreterProblem,
  needsRestart,
  parseJsonc,
  plural,
  resolvePython,
  RESTART_KEYS,
  SERVER_KEYS,
  serverCommand,
  serverSettings,
  stderrLevel,
  toggled,
  wantsServer,
} from '../src/config';
import {
  detailsText,
  formatStats,
  type ServerState,
  stateOfStatus,
  statusView,
} from '../src/state';

const manifest = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'),
) as { contributes: { configuration: { properties: Record<string, { default?: unknown }> } } };
const properties = manifest.contributes.configuration.properties;

test('serverSettings sends only what the user set, the most specific level winning', () => {
  const levels: Record<string, Inspected> = {
    k: { globalValue: 5 },
    model: { globalValue: 'a', workspaceValue: 'b' },
    lineMode: { globalValue: 'single', workspaceValue: 'single', workspaceFolderValue: 'multi' },
    alpha: {},
    pythonPath: { globalValue: '/usr/bin/python3' },
  };
  const settings = serverSettings((key) => levels[key]);
  assert.deepEqual(settings, { k: 5, model: 'b', lineMode: 'multi' });
});

test('serverSettings keeps falsy values the user set', () => {
  const levels: Record<string, Inspected> = {
    indexOnSave: { globalValue: false },
    userWeight: { workspaceValue: 0 },
    codebaseDb: { globalValue: '' },
  };
  assert.deepEqual(
    serverSettings((key) => levels[key]),
    {
      indexOnSave: false,
      userWeight: 0,
      codebaseDb: '',
    },
  );
});

test('every server setting is in package.json with a type, default and description', () => {
  for (const key of SERVER_KEYS) {
    const property = properties[`superposed.${key}`] as Record<string, unknown> | undefined;
    assert.ok(property, `superposed.${key} is missing from package.json`);
    assert.ok(property.type, `superposed.${key} has no type`);
    assert.ok('default' in property, `superposed.${key} has no default`);
    assert.ok(property.description, `superposed.${key} has no description`);
  }
});

test('a change of interpreter or model restarts the server; a change of k does not', () => {
  const changed = (keys: string[]) => (section: string) =>
    keys.some((key) => section === `superposed.${key}`);
  assert.equal(needsRestart(changed(['pythonPath'])), true);
  assert.equal(needsRestart(changed(['model'])), true);
  assert.equal(needsRestart(changed(['dtype'])), true);
  assert.equal(needsRestart(changed(['languages'])), true); // the document selector
  assert.equal(needsRestart(changed(['k', 'alpha'])), false);
});

test('a file in one of superposed.languages starts the server; other documents do not', () => {
  const doc = (languageId: string, scheme = 'file') => ({ languageId, uri: { scheme } });
  assert.equal(wantsServer(['python'], doc('python')), true);
  assert.equal(wantsServer(['python', 'rust'], doc('rust')), true);
  assert.equal(wantsServer(['python'], doc('markdown')), false);
  assert.equal(wantsServer(['python'], doc('python', 'output')), false); // not a file
});

test('the interpreter: the setting, else the Python extension, else python3', () => {
  assert.equal(
    resolvePython('/opt/venv/bin/python', '/usr/bin/python3.12', undefined),
    '/opt/venv/bin/python',
  );
  assert.equal(resolvePython('  ', '/usr/bin/python3.12', undefined), '/usr/bin/python3.12');
  assert.equal(resolvePython(undefined, undefined, undefined, 'linux'), 'python3');
  assert.equal(resolvePython('', undefined, undefined, 'win32'), 'python');
});

test('pythonPath expands ~ and ${workspaceFolder}', () => {
  assert.equal(
    resolvePython('${workspaceFolder}/.venv/bin/python', undefined, '/src/proj'),
    '/src/proj/.venv/bin/python',
  );
  assert.equal(
    expandPath('~/venv/bin/python', undefined),
    path.join(os.homedir(), 'venv/bin/python'),
  );
  assert.equal(expandPath('/a/~b', undefined), '/a/~b');
});

test('the server runs as a module of the chosen interpreter, on stdio', () => {
  assert.deepEqual(serverCommand('/v/bin/python'), {
    command: '/v/bin/python',
    args: ['-m', 'lsp_server.cli'],
  });
  assert.deepEqual(serverCommand('python3', ['-v']).args, ['-m', 'lsp_server.cli', '-v']);
});

test('superposed/status maps to the status bar state, whatever its message says', () => {
  const ready = (): ServerState => ({ kind: 'ready', model: 'm', k: 3 });
  const model = 'smollm2-135m';
  // The messages would have fooled the old text matching ('index', 'failed'): only state counts.
  assert.deepEqual(stateOfStatus({ state: 'loading', model, message: 'index' }, ready), {
    kind: 'loading',
    message: 'index',
    percent: undefined,
  });
  assert.deepEqual(
    stateOfStatus({ state: 'indexing', model, message: 'a.py', percent: 40 }, ready),
    { kind: 'indexing', message: 'a.py', percent: 40 },
  );
  assert.deepEqual(stateOfStatus({ state: 'ready', model, message: 'failed: no' }, ready), ready());
  const eager = stateOfStatus({ state: 'ready', model, step: 'eager' }, ready);
  assert.deepEqual(eager, { ...ready(), step: 'eager' });
  assert.equal(statusView(eager).text, '$(check) Superposed: ready (m, k=3)');
  assert.deepEqual(stateOfStatus({ state: 'error', model, message: 'no such model' }, ready), {
    kind: 'error',
    what: 'the model did not load',
    message: 'no such model',
  });
});

test("the server settings are package.json's, less the extension's own", () => {
  const declared = Object.keys(properties).map((key) => key.replace(/^superposed\./, ''));
  assert.deepEqual([...SERVER_KEYS, ...EXTENSION_KEYS].sort(), declared.sort());
  assert.ok(SERVER_KEYS.includes('k') && !SERVER_KEYS.includes('pythonPath'));
  // The research knobs reach the server inside one object (lsp_server/settings.py RESEARCH).
  assert.ok(SERVER_KEYS.includes('research') && !SERVER_KEYS.includes('alpha'));
  for (const key of RESTART_KEYS) {
    assert.ok(declared.includes(key), `superposed.${key} (a restart key) is not declared`);
  }
});

test('the status bar says what the server is doing, in words for people', () => {
  const loading = statusView({ kind: 'loading', message: 'converting model.gguf', percent: 42.4 });
  assert.match(loading.text, /Superposed: loading model 42%/);
  assert.match(loading.tooltip, /^Converting model\.gguf; drafts start when it is ready/);
  assert.match(statusView({ kind: 'indexing', percent: 7 }).text, /indexing 7%/);
  const stats = { stores: { files: 4 }, settings: { alpha: 0.5 }, counters: { requests: 9 } };
  const ready = statusView({ kind: 'ready', model: 'smollm2-135m', k: 3, stats });
  assert.equal(ready.text, '$(check) Superposed: ready (smollm2-135m, k=3)');
  // The tooltip is short: no counters (they are behind Show Details)
  assert.equal(ready.tooltip, 'Drafts from smollm2-135m, 3 at a time. Click for details.');
  const eager = { decodeStep: 'eager', compiledStep: 'building' };
  const building = statusView({ kind: 'ready', model: 'smollm2-135m', k: 3, stats: eager });
  assert.equal(building.text, ready.text);
  assert.match(building.tooltip, /first drafts come slower/);
  for (const view of [loading, ready, building]) {
    assert.doesNotMatch(`${view.text} ${view.tooltip}`, /eager|compiled|step/);
    assert.ok(view.tooltip.split('\n').length <= 2, view.tooltip);
  }
  const problem = statusView({ kind: 'error', what: 'Python not found', message: 'Set it.' });
  assert.equal(problem.text, '$(error) Superposed: Python not found');
  assert.equal(problem.tooltip, 'Set it. Click for details.');
});

test('Show Details has the state in words and every counter', () => {
  const stats = { model: 'm', counters: { requests: 9 }, settings: { alpha: 0.5 } };
  const text = detailsText({ kind: 'ready', model: 'm', k: 3, stats }, stats);
  assert.match(text, /^# Superposed: ready \(m, k=3\)\n\nDrafts from m, 3 at a time\.\n/);
  assert.match(text, /counters\.requests: 9/);
  assert.match(text, /settings\.alpha: 0\.5/);
  const down = detailsText(
    { kind: 'error', what: 'Python not found', message: 'Set it.' },
    undefined,
  );
  assert.match(down, /^# Superposed: Python not found\n\nSet it\.\n/);
});

test('pythonPath from whichever level holds it, User settings of a remote window included', () => {
  assert.equal(configuredPython(undefined), undefined);
  assert.equal(configuredPython({ globalValue: '  ' }), undefined);
  assert.equal(configuredPython({ globalLocalValue: '/u/py' }), '/u/py');
  assert.equal(configuredPython({ globalValue: '/g/py', globalLocalValue: '/u/py' }), '/g/py');
  assert.equal(
    configuredPython({ workspaceValue: '/w/py', globalRemoteValue: '/m/py', globalValue: '/g' }),
    '/w/py',
  );
  assert.equal(configuredPython({ globalRemoteValue: '/m/py', globalLocalValue: '/u' }), '/m/py');
});

test('a settings.json with comments and trailing commas parses', () => {
  const text =
    '{\n  // the venv\n  "superposed.pythonPath": "/a//b/*c*/py", /* x */\n  "k": [1,],\n}';
  assert.deepEqual(parseJsonc(text), { 'superposed.pythonPath': '/a//b/*c*/py', k: [1] });
});

test('the interpreter check tells a missing interpreter from a missing package', () => {
  const missing = interpreterProblem('/no/python', { errorCode: 'ENOENT', output: '' });
  assert.equal(missing?.what, 'Python not found');
  assert.match(missing?.message ?? '', /\/no\/python does not exist/);
  assert.match(missing?.message ?? '', /`superposed\.pythonPath`/);
  const bare = interpreterProblem('/usr/bin/python3', {
    exitCode: 3,
    output: "No module named 'lsp_server'\n",
  });
  assert.equal(bare?.what, 'superposed-lsp not installed');
  assert.match(bare?.message ?? '', /No module named 'lsp_server'/);
  assert.match(bare?.message ?? '', /`make setup`/);
  assert.match(bare?.message ?? '', /`superposed\.pythonPath`/);
  assert.equal(interpreterProblem('py', { exitCode: 0, output: '' }), undefined);
  assert.equal(interpreterProblem('py', { exitCode: null, timedOut: true, output: '' }), undefined);
});

test("the server's stderr lines get their own log level", () => {
  const at = (level: string) => `2026-12-06 08:00:00,123 ${level} pygls.protocol: x`;
  assert.equal(stderrLevel(at('WARNING'), undefined), 'warn');
  assert.equal(stderrLevel(at('INFO'), 'error'), 'info');
  assert.equal(stderrLevel(at('DEBUG'), undefined), 'debug');
  assert.equal(stderrLevel(at('ERROR'), undefined), 'error');
  assert.equal(stderrLevel('  File "x.py", line 3', 'warn'), 'warn'); // a message's next line
  assert.equal(stderrLevel('Traceback (most recent call last):', 'info'), 'error');
  assert.equal(stderrLevel("python3: No module named 'lsp_server'", undefined), 'error');
});

test('counts in words', () => {
  assert.equal(plural(1, 'folder'), '1 folder');
  assert.equal(plural(2, 'folder'), '2 folders');
  assert.equal(plural(0, 'stored file'), '0 stored files');
});

test('stats flatten to one line per value', () => {
  assert.deepEqual(formatStats({ codebase: { files: 2, tokens: 10 }, model: 'm' }), [
    'codebase.files: 2',
    'codebase.tokens: 10',
    'model: "m"',
  ]);
});

test('acceptedPart: the next part of one of our drafts, after what was typed since', () => {
  const answered = { line: '    return ', drafts: ['width * height', 'side * side'] };
  assert.equal(acceptedPart(answered, '    return ', 'width'), 'width');
  // After accepting "width", the next word continues the same draft.
  assert.equal(acceptedPart(answered, '    return width', ' *'), ' *');
  assert.equal(acceptedPart(answered, '    return s', 'ide'), 'ide');
  // Not ours: another suggestion, another line, nothing inserted, no answer yet.
  assert.equal(acceptedPart(answered, '    return ', 'area('), undefined);
  assert.equal(acceptedPart(answered, '    x = ', 'width'), undefined);
  assert.equal(acceptedPart(answered, '    return ', ''), undefined);
  assert.equal(acceptedPart(undefined, '    return ', 'width'), undefined);
});

test('acceptedPart: a block accepted line by line, past the line it was drafted on', () => {
  const block = '\n    b = a * 2\n    return b';
  const answered = { line: 'def f(a):', drafts: [block], row: 4 };
  assert.equal(acceptedPart(answered, 'def f(a):', '\n'), '\n');
  assert.equal(acceptedPart(answered, 'def f(a):\n', '    b = a * 2\n'), '    b = a * 2\n');
  assert.equal(
    acceptedPart(answered, 'def f(a):\n    b = a * 2\n', '    return b'),
    '    return b',
  );
  assert.equal(acceptedPart(answered, 'def f(a):\n', '    c = 1\n'), undefined);
});

test('toggled adds a language once and removes it again', () => {
  assert.deepEqual(toggled([], 'python'), ['python']);
  assert.deepEqual(toggled(['go', 'python'], 'python'), ['go']);
});
