// Drives code-server through drafts that build on the item selected in VS Code's suggest widget
// (issue 24 item 4): after typing the start of a name defined above, Ctrl+Space
// (editor.action.triggerSuggest) opens the suggest widget on VS Code's own word-based
// suggestion; VS Code then asks for inline completions with selectedCompletionInfo, and the
// ghost text shown with the widget open continues the selected item. Tab accepts as VS Code
// does (the item, then the draft); Superposed: Show Stats logs the server's counters.
//
//   node suggest.mjs config.json      (config: see tests/e2e/test_vscode_suggest.py)
//
// Writes config.result (JSON) with what the editor showed and the file as saved; the Python
// test asserts on it.
import * as fs from 'node:fs';
import * as path from 'node:path';

import { drive, ghostText, openAndWaitReady, runCommand, saveAndRead } from './editor.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const timeout = config.timeoutMs ?? 300_000;

/** The suggest widget's rows (their labels) and the selected one's, if it is open. */
async function suggestWidget(page) {
  return page.evaluate(() => {
    const widget = document.querySelector('.monaco-editor .suggest-widget.visible');
    if (!widget) return undefined;
    const label = (row) =>
      (row.querySelector('.label-name')?.textContent ?? row.textContent ?? '').trim();
    const rows = [...widget.querySelectorAll('.monaco-list-row')];
    const focused = widget.querySelector('.monaco-list-row.focused');
    return { labels: rows.map(label), selected: focused ? label(focused) : undefined };
  });
}

await drive(
  { failureScreenshot: 'vscode-suggest-failure.png', ...config },
  async (page, result, step) => {
    step('open the file and wait for the model');
    const editor = await openAndWaitReady(page, config, config.file, timeout, result);

    step('type the start of a name defined above');
    await editor.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type(config.typed, { delay: 30 });
    await page.keyboard.press('Escape'); // no ghost text from typing: only the widget's

    step('open the suggest widget (Ctrl+Space) and wait for ghost text beside it');
    await page.keyboard.press('Control+Space');
    const deadline = Date.now() + timeout;
    let last = '';
    let since = Date.now();
    for (;;) {
      const widget = await suggestWidget(page);
      const shown = await ghostText(page);
      if (widget !== undefined) result.widget = widget;
      if (shown !== last) {
        last = shown;
        since = Date.now();
      } else if (widget !== undefined && shown.trim() !== '' && Date.now() - since > 1500) {
        result.ghostWithWidget = shown;
        break;
      }
      if (Date.now() > deadline) {
        throw new Error(`no ghost text with the widget open (widget: ${JSON.stringify(widget)})`);
      }
      await page.waitForTimeout(250);
    }
    if (config.screenshot) {
      fs.mkdirSync(path.dirname(config.screenshot), { recursive: true });
      await page.screenshot({ path: config.screenshot });
    }

    step('accept the item (Tab), then the draft (Tab)');
    // With the widget open, Tab accepts the widget's item; the draft after it stays as ghost
    // text, and a second Tab accepts it.
    await page.keyboard.press('Tab');
    await page.waitForTimeout(1000);
    result.widgetAfterTab = await suggestWidget(page);
    result.ghostAfterTab = await ghostText(page);
    result.afterTab = await saveAndRead(page, config.filePath, timeout);
    await page.keyboard.press('Tab');
    await page.waitForTimeout(1000);
    result.afterSecondTab = await saveAndRead(page, config.filePath, timeout);

    step('Superposed: Show Stats');
    await runCommand(page, 'Superposed: Show Stats', timeout);
    await page.waitForTimeout(1500);
    step('done');
  },
);
