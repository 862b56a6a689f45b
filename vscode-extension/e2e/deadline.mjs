// Drives code-server through an answer cut at the server's deadline (answerWithinMs): type,
// Alt+\ for the drafts (cut: a few tokens each), then no key at all: the server says when the
// drafts are whole (superposed/draftsWhole) and the extension asks again, so the ghost text
// grows where the cursor stands.
//
//   node deadline.mjs config.json      (config: see tests/e2e/test_vscode_deadline.py)
import * as fs from 'node:fs';

import { drive, ghostsShown, openAndWaitReady, recordGhosts, requireGhost } from './editor.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const timeout = config.timeoutMs ?? 300_000;

/** The ghost text shown before `text` last came (none empty), or undefined. */
async function shownBefore(page, text) {
  const shown = await ghostsShown(page);
  const at = shown.lastIndexOf(text);
  return shown
    .slice(0, at === -1 ? shown.length : at)
    .filter((t) => t.trim() !== '' && t !== text)
    .at(-1);
}

await drive(
  { failureScreenshot: 'vscode-deadline-failure.png', ...config },
  async (page, result, step) => {
    step('open the file and wait for the model');
    const editor = await openAndWaitReady(page, config, config.file, timeout, result);

    step('type, then the drafts (Alt+\\): cut at the deadline');
    await editor.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type(config.type, { delay: 30 });
    await recordGhosts(page);
    await page.keyboard.press('Alt+Backslash');
    const still = await requireGhost(page, undefined, timeout);

    step('no key: the drafts whole');
    // The cut drafts were shown before the ghost text read still: it is the whole already.
    // Otherwise it is the cut, and the whole comes.
    result.cut = (await shownBefore(page, still)) ?? still;
    result.whole = result.cut === still ? await requireGhost(page, still, 60_000) : still;
    result.ghostTexts = await ghostsShown(page);
    step('done');
  },
);
