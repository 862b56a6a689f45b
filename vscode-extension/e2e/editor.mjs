// What the code-server drivers share: the browser, opening a file, waiting for the server,
// running a command, reading the ghost text (all its lines) and saving.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { chromium } from 'playwright-core';

/** The inline part of the ghost text, and the lines VS Code shows below the cursor's line
 * (run in the page). */
function readGhost() {
  const text = (el) => (el.textContent ?? '').replace(/\u00a0/g, ' ');
  const inline = [
    ...document.querySelectorAll(
      '.monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text-decoration-preview',
    ),
  ].map(text);
  const below = [
    ...document.querySelectorAll('.monaco-editor .suggest-preview-text .view-line'),
  ].map(text);
  return [inline.join(''), ...below].join('\n').replace(/\n+$/, '');
}

export async function ghostText(page) {
  return page.evaluate(readGhost);
}

/** From now on, every ghost text the editor renders (as ghostText reads it) is recorded in the
 * page, each new one once (a MutationObserver on the editor): `ghostsShown` reads them. What
 * shows for less time than stableGhost's stillness needs is not missed. */
export async function recordGhosts(page) {
  await page.evaluate(`(() => {
    const read = ${readGhost};
    window.ghostTexts = [read()];
    const record = () => {
      const shown = read();
      if (shown !== window.ghostTexts.at(-1)) {
        window.ghostTexts.push(shown);
      }
    };
    const editor = document.querySelector('.editor-instance .monaco-editor');
    new MutationObserver(record).observe(editor, { subtree: true, childList: true, characterData: true });
  })()`);
}

/** The ghost texts rendered since `recordGhosts`, in order. */
export async function ghostsShown(page) {
  return page.evaluate(() => window.ghostTexts);
}

/** Waits until the ghost text is non-empty, differs from `not`, and holds still for a moment;
 * `undefined` when none comes within `waitMs`. */
export async function stableGhost(page, not, waitMs) {
  const deadline = Date.now() + waitMs;
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
  return undefined;
}

/** The stable ghost text (see `stableGhost`), or an error that says none came. */
export async function requireGhost(page, not, waitMs) {
  const shown = await stableGhost(page, not, waitMs);
  if (shown === undefined) {
    throw new Error(`no ghost text (other than ${JSON.stringify(not)}) within ${waitMs} ms`);
  }
  return shown;
}

export async function statusText(page) {
  const item = page.locator('.statusbar-item', { hasText: 'Superposed' }).first();
  return (await item.count()) > 0 ? ((await item.textContent()) ?? '').trim() : '';
}

export async function runCommand(page, title, timeout) {
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

/** A fresh headless Chromium (launchPersistentContext is Playwright's --user-data-dir). */
export async function launch(config) {
  return chromium.launchPersistentContext(config.browserProfile, {
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
}

/** Ctrl+P `file`: its editor, opened or brought to the front, is the active one. */
export async function quickOpen(page, file) {
  await page.keyboard.press('Control+P');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible' });
  await input.fill(file);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: file }).first().waitFor();
  await page.keyboard.press('Enter');
  await page.locator(`.tab.active`, { hasText: file }).waitFor();
}

/** Opens the workbench and `file` (Ctrl+P); waits until the server says ready. The editor. */
export async function openAndWaitReady(page, config, file, timeout, result) {
  await page.goto(config.url, { waitUntil: 'domcontentloaded', timeout });
  await page.locator('.monaco-workbench').waitFor({ timeout });
  await quickOpen(page, file);
  const editor = page.locator('.editor-instance .monaco-editor .view-lines').first();
  await editor.waitFor();
  await page
    .locator('.statusbar-item', { hasText: /Superposed: (?!starting|loading|indexing)/ })
    .first()
    .waitFor({ timeout });
  result.statusReady = await statusText(page);
  if (!result.statusReady.includes('ready')) {
    throw new Error(`the status bar says ${JSON.stringify(result.statusReady)}`);
  }
  return editor;
}

/** Ctrl+S, then the file as saved on disk. */
export async function saveAndRead(page, file, timeout) {
  await page.keyboard.press('Control+S');
  await page.locator('.tab.active.dirty').waitFor({ state: 'detached', timeout });
  return fs.readFileSync(file, 'utf8');
}

/** Runs `steps(page, result, step)`, then writes config.result (with the error, and
 * config.failureScreenshot in config.outputDir, if it failed) and exits 0 or 1. */
export async function drive(config, steps) {
  const result = { steps: [] };
  const context = await launch(config);
  let page;
  try {
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(config.timeoutMs ?? 300_000);
    await steps(page, result, (name) => {
      result.steps.push(`${new Date().toISOString()} ${name}`);
      console.error(`driver: ${name}`);
    });
  } catch (err) {
    result.error = String(err && err.stack ? err.stack : err);
    if (page && config.outputDir && config.failureScreenshot) {
      fs.mkdirSync(config.outputDir, { recursive: true });
      await page
        .screenshot({ path: path.join(config.outputDir, config.failureScreenshot) })
        .catch(() => {});
    }
  } finally {
    fs.writeFileSync(config.result, JSON.stringify(result, null, 2));
    await context.close();
  }
  process.exit(result.error ? 1 : 0);
}
