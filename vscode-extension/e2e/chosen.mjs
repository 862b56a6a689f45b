// Drives code-server through cycling and a partial accept: type, Alt+\ for the drafts, Alt+]
// as many times as config.cycles says, then Ctrl+Right (Superposed: Accept Next Word of the
// Draft); what the ghost text showed at each step. Optionally a screenshot of the status bar
// and the ghost text after cycling (config.screenshot).
//
//   node chosen.mjs config.json      (config: see tests/e2e/test_vscode_chosen.py)
import * as fs from 'node:fs';
import * as path from 'node:path';

import { drive, ghostText, openAndWaitReady, requireGhost, stableGhost } from './editor.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const timeout = config.timeoutMs ?? 300_000;

await drive(
  { failureScreenshot: 'vscode-chosen-failure.png', ...config },
  async (page, result, step) => {
    step('open the file and wait for the model');
    const editor = await openAndWaitReady(page, config, config.file, timeout, result);
    const ghost = (not) => requireGhost(page, not, timeout);

    step('type, then the drafts (Alt+\\)');
    await editor.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type(config.type, { delay: 30 });
    await page.keyboard.press('Alt+Backslash');
    result.ghosts = [await ghost(undefined)];

    for (let i = 0; i < config.cycles; i++) {
      step('the next draft (Alt+])');
      await page.keyboard.press('Alt+BracketRight');
      result.ghosts.push(await ghost(result.ghosts.at(-1)));
    }
    if (config.screenshot) {
      fs.mkdirSync(path.dirname(config.screenshot), { recursive: true });
      await page.screenshot({ path: config.screenshot });
    }

    step('accept the next word (Ctrl+Right)');
    const before = result.ghosts.at(-1);
    await page.keyboard.press('Control+ArrowRight');
    result.ghostAfterWord = (await stableGhost(page, before, 20_000)) ?? (await ghostText(page));
    result.lineAfterWord = await page.evaluate(() => {
      const lines = [...document.querySelectorAll('.monaco-editor .view-lines .view-line')];
      const current = document.querySelector('.monaco-editor .current-line');
      const top = current?.getBoundingClientRect().top;
      const line = lines.find((el) => Math.abs(el.getBoundingClientRect().top - top) < 2);
      const copy = line?.cloneNode(true);
      copy?.querySelectorAll('[class*="ghost-text"]').forEach((el) => el.remove());
      return (copy?.textContent ?? '').replace(/\u00a0/g, ' ');
    });
    step('done');
  },
);
