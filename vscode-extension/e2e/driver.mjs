// Drives a real VS Code (code-server) in headless Chromium through the user's steps:
// wait for the server, index the workspace, open a file, type, trigger the inline suggestion,
// read the ghost text, cycle to the next draft (Alt+]), accept its next word (Ctrl+Right,
// Superposed: Accept Next Word of the Draft), accept the rest (Tab) and save, switch to another
// file and back; then turn the drafts off for the language (Superposed: Toggle Completions for
// This Language) and type.
//
//   node driver.mjs config.json      (config: see tests/e2e/test_vscode_editor.py)
//
// Writes config.result (JSON) with what the editor showed; the Python test asserts on it and
// on the files on disk. On failure it also saves a screenshot into config.outputDir.
import * as fs from 'node:fs';
import * as path from 'node:path';

import {
  drive,
  ghostText,
  openAndWaitReady,
  quickOpen,
  requireGhost,
  runCommand,
  statusText,
} from './editor.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const timeout = config.timeoutMs ?? 300_000;

await drive({ failureScreenshot: 'vscode-failure.png', ...config }, async (page, result, step) => {
  const ghost = (not) => requireGhost(page, not, timeout);
  // The extension starts the server with the first Python file: open it, then wait.
  step('open the file and wait for the model');
  const editor = await openAndWaitReady(page, config, config.file, timeout, result);

  step('index the workspace');
  await runCommand(page, 'Superposed: Index Workspace', timeout);
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
  result.ghost1 = await ghost(undefined);
  if (config.screenshot) {
    fs.mkdirSync(path.dirname(config.screenshot), { recursive: true });
    await page.screenshot({ path: config.screenshot });
  }

  step('next draft (Alt+])');
  await page.keyboard.press('Alt+BracketRight');
  result.ghost2 = await ghost(result.ghost1);

  step('accept the next word (Ctrl+Right)');
  await page.keyboard.press('Control+ArrowRight');
  result.ghostAfterWord = await ghost(result.ghost2);

  step('accept the rest (Tab) and save');
  await page.keyboard.press('Tab');
  await page.waitForTimeout(500);
  await page.keyboard.press('Control+S');
  await page.locator('.tab.active.dirty').waitFor({ state: 'detached', timeout });
  // The status bar's tooltip refreshes the store stats two seconds after a save.
  await page.waitForTimeout(3000);
  result.statusAfterSave = await statusText(page);

  step('open another file (Ctrl+P), then back to the first (its tab): the cursor arrives in each');
  await quickOpen(page, config.otherFile);
  await page.waitForTimeout(1500); // the extension tells a rest after 300 ms
  await page.locator('.tab', { hasText: config.file }).first().click();
  await page.locator('.tab.active', { hasText: config.file }).waitFor();
  await page.waitForTimeout(1500);

  step('toggle completions off for the language');
  await runCommand(page, 'Superposed: Toggle Completions for This Language', timeout);
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
});
