// Drives code-server through a next edit that only inserts: an argument added to one call
// (`db.get(uid)` -> `db.get(uid, None)`) is proposed at the other call of the same function;
// Tab jumps there, where the inserted text shows after the site with nothing struck through;
// Tab accepts it.
//
//   node nextEditsInsert.mjs config.json      (config: see tests/e2e/test_vscode_next_edits.py)
import * as fs from 'node:fs';

import { drive, openAndWaitReady, saveAndRead } from './editor.mjs';
import { cursor, waitView } from './nextEditsView.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const timeout = config.timeoutMs ?? 300_000;

await drive(
  { failureScreenshot: 'vscode-next-edits-insert-failure.png', ...config },
  async (page, result, step) => {
    step('open the file and wait for the server');
    const editor = await openAndWaitReady(page, config, config.file, timeout, result);
    await editor.click();

    step('add an argument at one call');
    await page.keyboard.press('Control+G');
    await page.keyboard.type(`${config.typeAt.line}:${config.typeAt.column}`);
    await page.keyboard.press('Enter');
    await page.keyboard.type(config.typed, { delay: 40 });

    step('the gutter mark at the other call');
    result.beforeJump = await waitView(
      page,
      'a gutter mark',
      (view) => view.marks.length > 0,
      timeout,
    );

    step('Tab jumps there: the inserted text after the site');
    await page.keyboard.press('Tab');
    result.atSite = await waitView(
      page,
      'the insert at the site',
      (view) => view.after.some((a) => a.text === config.typed),
      timeout,
    );
    result.cursorAtSite = await cursor(page);

    step('Tab accepts it');
    await page.keyboard.press('Tab');
    await page.waitForTimeout(500);
    result.afterAccept = await saveAndRead(page, config.filePath, timeout);
    step('done');
  },
);
