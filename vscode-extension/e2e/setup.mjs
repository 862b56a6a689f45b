// Drives code-server through what a new user meets while setting up: the status bar and the
// messages (toasts) while the server starts, fails or loads, a settings file rewritten as the
// Settings UI does, and commands such as Superposed: Restart Server. The steps come from the
// config, in order:
//
//   {"do": "open", "file": NAME}                       open a file (Ctrl+P)
//   {"do": "status", "pattern": REGEX, "as": KEY}      wait for the status bar item to match;
//                                                      its text goes to result[KEY]
//   {"do": "settings", "path": FILE, "settings": {}}   write a settings.json
//   {"do": "command", "title": TITLE}                  run a command from the palette
//   {"do": "toast", "pattern": REGEX}                  wait for a message that matches
//   {"do": "loadingItems", "as": KEY}                  the status bar items that say loading
//   {"do": "editorText", "tab": NAME, "as": KEY}      the text shown in the editor tab NAME
//   {"do": "log", "pattern": REGEX, "count": N}        wait for N lines of the extension's
//                                                      log (config.logs) to match
//
//   node setup.mjs config.json      (config: see tests/e2e/test_vscode_setup.py)
//
// Writes config.result (JSON): what each step saw, and at the end every message shown
// (result.messages, from the notification center) and the status bar (result.statusEnd).
import * as fs from 'node:fs';
import * as path from 'node:path';

import { drive, runCommand, statusText } from './editor.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const timeout = config.timeoutMs ?? 300_000;

/** The text of every notification, from the notification center (it keeps hidden toasts). */
async function messages(page) {
  await runCommand(page, 'Notifications: Show Notifications', timeout);
  const center = page.locator('.notifications-center');
  await center.waitFor({ timeout });
  const rows = center.locator('.notification-list-item-message');
  const texts = await rows.evaluateAll((els) => els.map((el) => el.textContent ?? ''));
  await page.keyboard.press('Escape');
  return texts;
}

/** Every line of the extension's log files under `dir`. */
function logLines(dir) {
  const lines = [];
  for (const entry of fs.readdirSync(dir, { recursive: true })) {
    const file = path.join(dir, String(entry));
    if (/Superposed.*\.log$/.test(file) && fs.statSync(file).isFile()) {
      lines.push(...fs.readFileSync(file, 'utf8').split('\n'));
    }
  }
  return lines;
}

await drive(
  { failureScreenshot: 'vscode-setup-failure.png', ...config },
  async (page, result, step) => {
    await page.goto(config.url, { waitUntil: 'domcontentloaded', timeout });
    await page.locator('.monaco-workbench').waitFor({ timeout });
    for (const action of config.steps) {
      step(JSON.stringify(action));
      switch (action.do) {
        case 'open': {
          await page.keyboard.press('Control+P');
          const input = page.locator('.quick-input-widget input');
          await input.waitFor({ state: 'visible' });
          await input.fill(action.file);
          await page
            .locator('.quick-input-list .monaco-list-row', { hasText: action.file })
            .first()
            .waitFor();
          await page.keyboard.press('Enter');
          await page.locator('.tab.active', { hasText: action.file }).waitFor();
          break;
        }
        case 'status': {
          // the text of the item that matched, read through the same filter
          const item = page
            .locator('.statusbar-item', { hasText: new RegExp(action.pattern) })
            .first();
          await item.waitFor({ timeout: action.timeoutMs ?? timeout });
          result[action.as ?? 'status'] = ((await item.textContent()) ?? '').trim();
          break;
        }
        case 'loadingItems': {
          result[action.as] = await page
            .locator('.statusbar-item')
            .evaluateAll((els) =>
              els.map((el) => (el.textContent ?? '').trim()).filter((t) => /loading/i.test(t)),
            );
          break;
        }
        case 'log': {
          const pattern = new RegExp(action.pattern);
          const deadline = Date.now() + timeout;
          while (logLines(config.logs).filter((line) => pattern.test(line)).length < action.count) {
            if (Date.now() > deadline) {
              throw new Error(`no ${action.count} log lines match ${action.pattern}`);
            }
            await page.waitForTimeout(250);
          }
          break;
        }
        case 'editorText': {
          await page.locator('.tab.active', { hasText: action.tab }).waitFor({ timeout });
          const lines = page.locator('.editor-instance .monaco-editor .view-lines').first();
          await lines.locator('.view-line').first().waitFor({ timeout });
          result[action.as] = await lines.evaluate((el) =>
            [...el.querySelectorAll('.view-line')]
              .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)
              .map((line) => (line.textContent ?? '').replace(/\u00a0/g, ' '))
              .join('\n'),
          );
          break;
        }
        case 'settings':
          fs.writeFileSync(action.path, JSON.stringify(action.settings, null, 2));
          break;
        case 'command':
          await runCommand(page, action.title, timeout);
          break;
        case 'toast':
          await page
            .locator('.notifications-toasts .notification-toast', {
              hasText: new RegExp(action.pattern),
            })
            .first()
            .waitFor({ timeout });
          break;
        default:
          throw new Error(`unknown step ${JSON.stringify(action)}`);
      }
    }
    result.statusEnd = await statusText(page);
    result.messages = await messages(page);
    step('done');
  },
);
