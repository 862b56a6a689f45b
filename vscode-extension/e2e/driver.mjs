// Drives a real VS Code (code-server) in headless Chromium through the user's steps:
// wait for the server, index the workspace, open a file, type, trigger the inline suggestion,
// read the ghost text, cycle to the next draft (Alt+]), accept its next word (Ctrl+Right,
// Superposed: Accept Next Word of the Draft), accept the rest (Tab) and save; then turn the
// drafts off for the language (Superposed: Toggle Completions for This Language) and type.
//
//   node driver.mjs config.json      (config: see tests/e2e/test_vscode_editor.py)
//
// Writes config.result (JSON) with what the editor showed; the Python test asserts on it and
// on the files on disk. On failure it also saves a screenshot into config.outputDir.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { chromium } from 'playwright-core';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const timeout = config.timeoutMs ?? 300_000;
const result = { steps: [] };
const step = (name) => {
  result.steps.push(`${new Date().toISOString()} ${name}`);
  console.error(`driver: ${name}`);
};

const GHOST =
  '.monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text-decoration-preview';

/** The ghost text on screen: the inline part and any lines below it, as plain text. */
async function ghostText(page) {
  return page.evaluate((selector) => {
    const parts = [...document.querySelectorAll(selector)].map((el) => el.textContent ?? '');
    const lines = [...document.querySelectorAll('.monaco-editor .ghost-text')].map(
      (el) => el.textContent ?? '',
    );
    return [parts.join(''), ...lines]
      .join('\n')
      .replace(/\u00a0/g, ' ')
      .replace(/\n+$/, '');
  }, GHOST);
}

/** Waits until the ghost text is non-empty, differs from `not`, and holds still for a moment. */
async function stableGhost(page, not) {
  const deadline = Date.now() + timeout;
  let last = '';
  let since = Date.now();
  while (Date.now() < deadline) {
    const text = await ghostText(page);
    if (text !== last) {
      last = text;
      since = Date.now();
    } else if (text.trim() !== '' && text !== not && Date.now() - since > 1500) {
      return text;
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`no ghost text (other than ${JSON.stringify(not)}) within ${timeout} ms`);
}

async function statusText(page) {
  const item = page.locator('.statusbar-item', { hasText: 'Superposed' }).first();
  return (await item.count()) > 0 ? ((await item.textContent()) ?? '').trim() : '';
}

async function runCommand(page, title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout });
  await input.fill(`>${title}`);
  await page
    .locator('.quick-input-list .monaco-list-row', { hasText: title })
    .first()
    .waitFor({ timeout });
  await page.keyboard.press('Enter');
}

// A fresh profile per run (launchPersistentContext is Playwright's --user-data-dir).
const context = await chromium.launchPersistentContext(config.browserProfile, {
  executablePath: config.chromium ?? '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1280, height: 800 },
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
let page;
try {
  page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(timeout);
  step(`open ${config.url}`);
  await page.goto(config.url, { waitUntil: 'domcontentloaded', timeout });
  await page.locator('.monaco-workbench').waitFor({ timeout });

  // The extension starts the server with the first Python file: open it, then wait.
  step('open the file');
  await page.keyboard.press('Control+P');
  const quickOpen = page.locator('.quick-input-widget input');
  await quickOpen.waitFor({ state: 'visible' });
  await quickOpen.fill(config.file);
  await page
    .locator('.quick-input-list .monaco-list-row', { hasText: config.file })
    .first()
    .waitFor();
  await page.keyboard.press('Enter');
  await page.locator(`.tab.active`, { hasText: config.file }).waitFor();
  const editor = page.locator('.editor-instance .monaco-editor .view-lines').first();
  await editor.waitFor();

  step('wait for the model');
  await page
    .locator('.statusbar-item', { hasText: /Superposed: (ready|error)/ })
    .first()
    .waitFor({ timeout });
  result.statusReady = await statusText(page);
  if (!result.statusReady.includes('ready')) {
    throw new Error(`the status bar says ${JSON.stringify(result.statusReady)}`);
  }

  step('index the workspace');
  await runCommand(page, 'Superposed: Index Workspace');
  await page
    .locator('.notifications-toasts .notification-toast', { hasText: 'workspace indexed' })
    .first()
    .waitFor({ timeout });
  await page.keyboard.press('Escape');

  step('type');
  await editor.click();
  await page.keyboard.press('Control+End');
  await page.keyboard.type(config.type, { delay: 40 });

  step('trigger the inline suggestion (Alt+\\)');
  await page.keyboard.press('Alt+Backslash');
  result.ghost1 = await stableGhost(page, undefined);
  if (config.screenshot) {
    fs.mkdirSync(path.dirname(config.screenshot), { recursive: true });
    await page.screenshot({ path: config.screenshot });
  }

  step('next draft (Alt+])');
  await page.keyboard.press('Alt+BracketRight');
  result.ghost2 = await stableGhost(page, result.ghost1);

  step('accept the next word (Ctrl+Right)');
  await page.keyboard.press('Control+ArrowRight');
  result.ghostAfterWord = await stableGhost(page, result.ghost2);

  step('accept the rest (Tab) and save');
  await page.keyboard.press('Tab');
  await page.waitForTimeout(500);
  await page.keyboard.press('Control+S');
  await page.locator('.tab.active.dirty').waitFor({ state: 'detached', timeout });
  // The status bar's tooltip refreshes the store stats two seconds after a save.
  await page.waitForTimeout(3000);
  result.statusAfterSave = await statusText(page);

  step('toggle completions off for the language');
  await runCommand(page, 'Superposed: Toggle Completions for This Language');
  await page
    .locator('.notifications-toasts .notification-toast', { hasText: 'completions off' })
    .first()
    .waitFor({ timeout });
  await page.keyboard.press('Escape');
  await editor.click();
  await page.keyboard.press('Control+End');
  await page.keyboard.type(config.typeWhenOff, { delay: 40 });
  await page.keyboard.press('Alt+Backslash');
  await page.waitForTimeout(8000); // an answer takes 1-2 s here; none may come
  result.ghostWhenOff = await ghostText(page);
  step('done');
} catch (err) {
  result.error = String(err && err.stack ? err.stack : err);
  if (page && config.outputDir) {
    fs.mkdirSync(config.outputDir, { recursive: true });
    await page
      .screenshot({ path: path.join(config.outputDir, 'vscode-failure.png') })
      .catch(() => {});
  }
} finally {
  fs.writeFileSync(config.result, JSON.stringify(result, null, 2));
  await context.close();
}
process.exit(result.error ? 1 : 0);
