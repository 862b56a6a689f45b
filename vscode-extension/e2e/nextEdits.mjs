// Drives code-server through a next edit: rename a function at one of its calls, wait for the
// gutter mark and the "Tab to jump" hint at the next call, Tab to jump there (the preview: the
// old name struck through, the new one beside it), Tab to accept, Superposed: List Next Edits,
// then Tab to the one after it and Esc to dismiss it.
//
//   node nextEdits.mjs config.json      (config: see tests/e2e/test_vscode_next_edits.py)
//
// Writes config.result (JSON) with what the editor showed at each step and the file as saved;
// the Python test asserts on it.
import * as fs from 'node:fs';
import * as path from 'node:path';

import { drive, openAndWaitReady, runCommand, saveAndRead } from './editor.mjs';
import { cursor, nextEditView, waitView } from './nextEditsView.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const timeout = config.timeoutMs ?? 300_000;
const waitFor = (page, what, ok, waitMs = timeout) => waitView(page, what, ok, waitMs);

await drive(
  { failureScreenshot: 'vscode-next-edits-failure.png', ...config },
  async (page, result, step) => {
    step('open the file and wait for the server');
    const editor = await openAndWaitReady(page, config, config.file, timeout, result);
    await editor.click();

    step('rename at one call');
    await page.keyboard.press('Control+G');
    await page.keyboard.type(`${config.renameAt.line}:${config.renameAt.column}`);
    await page.keyboard.press('Enter');
    for (const _ of config.oldName) {
      await page.keyboard.press('Shift+ArrowRight');
    }
    await page.keyboard.type(config.newName, { delay: 40 });
    result.cursorAfterRename = await cursor(page);

    step('the gutter mark and the hint at the next site');
    const shown = await waitFor(page, 'a gutter mark and a hint', (view) => {
      const mark = view.marks[0];
      return (
        mark !== undefined &&
        view.after.some((a) => a.line === mark && a.text.includes('Tab to jump'))
      );
    });
    result.beforeJump = shown;

    step('Tab jumps to it');
    await page.keyboard.press('Tab');
    result.atSite = await waitFor(
      page,
      'the preview at the site',
      (view) => view.struck.length > 0,
    );
    result.cursorAtSite = await cursor(page);
    if (config.screenshot) {
      fs.mkdirSync(path.dirname(config.screenshot), { recursive: true });
      await page.screenshot({ path: config.screenshot });
    }

    step('Tab accepts it');
    await page.keyboard.press('Tab');
    await page.waitForTimeout(500);
    result.afterAccept = await saveAndRead(page, config.filePath, timeout);
    result.cursorAfterAccept = await cursor(page);

    step('Superposed: List Next Edits');
    // The server proposes again after the accept (a change like any other): the next site.
    result.nextShown = await waitFor(
      page,
      'the next mark after the accept',
      (view) => view.marks.length > 0 && view.marks[0] !== result.cursorAfterAccept.line,
    );
    await runCommand(page, 'Superposed: List Next Edits', timeout);
    const rows = page.locator('.quick-input-list .monaco-list-row');
    await rows.first().waitFor({ timeout });
    await page.waitForTimeout(500);
    result.listed = await rows.evaluateAll((els) =>
      els.map((el) => ({
        label: el.querySelector('.label-name')?.textContent ?? '',
        description: el.querySelector('.label-description')?.textContent ?? '',
      })),
    );
    await page.keyboard.press('Escape'); // closes the list; the edit stays
    await page.waitForTimeout(500);
    result.afterList = await nextEditView(page);

    step('Tab to the next edit, Esc dismisses it');
    // The list closed: the editor has the focus again. Esc dismisses at a site only.
    await page.keyboard.press('Tab');
    await waitFor(page, 'the preview at the next site', (view) => view.struck.length > 0);
    result.cursorAtNext = await cursor(page);
    await page.keyboard.press('Escape');
    result.afterDismiss = await waitFor(
      page,
      'no mark after Esc',
      (view) => !view.marks.includes(result.nextShown.marks[0]),
      10_000,
    );
    await page.waitForTimeout(1500); // no notification brings it back
    result.afterDismissLater = await nextEditView(page);
    result.finalText = await saveAndRead(page, config.filePath, timeout);
    step('done');
  },
);
