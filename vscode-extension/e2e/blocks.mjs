// Drives code-server through multi-line drafts (blocks) and Superposed: Show Drafts: at the end
// of a `def` line, Alt+\ shows the block as ghost text and Ctrl+Alt+Right (Superposed: Accept
// Next Line of the Draft) accepts it one line at a time; after another `def` line, Tab accepts
// a block whole; after a third, Ctrl+Alt+Enter opens the drafts in a quick pick and the second
// is picked.
//
//   node blocks.mjs config.json      (config: see tests/e2e/test_vscode_blocks.py)
//
// Writes config.result (JSON) with what the editor showed and the file as saved after each
// stage; the Python test asserts on it.
import * as fs from 'node:fs';
import * as path from 'node:path';

import {
  drive,
  ghostText,
  openAndWaitReady,
  requireGhost,
  saveAndRead,
  stableGhost,
} from './editor.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const timeout = config.timeoutMs ?? 300_000;

await drive(
  { failureScreenshot: 'vscode-blocks-failure.png', ...config },
  async (page, result, step) => {
    step('open the file and wait for the model');
    const editor = await openAndWaitReady(page, config, config.file, timeout, result);
    const ghost = (not) => requireGhost(page, not, timeout);

    step('the block as ghost text (Alt+\\)');
    await editor.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.press('Alt+Backslash');
    result.ghostBlock = await ghost(undefined);
    if (config.screenshot) {
      fs.mkdirSync(path.dirname(config.screenshot), { recursive: true });
      await page.screenshot({ path: config.screenshot });
    }

    step('accept it line by line (Ctrl+Alt+Right)');
    let shown = result.ghostBlock;
    result.ghostsByLine = [shown];
    // Until the ghost text is no longer the rest of the block (all of it went in).
    while (shown !== '' && config.block.endsWith(shown) && result.ghostsByLine.length < 10) {
      await page.keyboard.press('Control+Alt+ArrowRight');
      shown = (await stableGhost(page, shown, 10_000)) ?? (await ghostText(page));
      result.ghostsByLine.push(shown);
    }
    await page.keyboard.press('Escape');
    result.afterLines = await saveAndRead(page, config.filePath, timeout);

    step('another block, accepted whole (Tab)');
    await page.keyboard.press('Control+End');
    await page.keyboard.type(config.typeForWhole, { delay: 30 });
    await page.keyboard.press('Alt+Backslash');
    result.ghostWhole = await ghost(undefined);
    await page.keyboard.press('Tab');
    await page.waitForTimeout(500);
    result.afterWhole = await saveAndRead(page, config.filePath, timeout);

    step('Superposed: Show Drafts (Ctrl+Alt+Enter) after another def');
    await page.keyboard.press('Control+End');
    await page.keyboard.type(config.typeForPick, { delay: 30 });
    // The inline requests the typing made are answered before the pick is asked for: the
    // server answers a request that a newer one for the document supersedes with nothing,
    // and an inline request still in flight superseded the pick's (under load, "no drafts
    // here"). That an asked-for request is superseded so is the server's to change.
    await page.keyboard.press('Alt+Backslash');
    await ghost(undefined);
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+Alt+Enter');
    const rows = page.locator('.quick-input-list .monaco-list-row');
    await rows.first().waitFor({ timeout });
    await page.waitForTimeout(500);
    result.pickRows = await rows.evaluateAll((els) =>
      els.map((el) => ({
        label: el.querySelector('.label-name')?.textContent ?? '',
        description: el.querySelector('.label-description')?.textContent ?? '',
        aria: el.getAttribute('aria-label') ?? '',
      })),
    );
    if (config.pickScreenshot) {
      await page.screenshot({ path: config.pickScreenshot });
    }
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await page.waitForTimeout(1000);
    result.afterPick = await saveAndRead(page, config.filePath, timeout);
    step('done');
  },
);
