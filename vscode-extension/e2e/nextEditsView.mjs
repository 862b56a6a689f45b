// What the next-edits drivers read from code-server's DOM: the gutter marks (our icon's lines),
// the decorations' after-texts and struck-through texts, and the cursor from the status bar.

/** What the editor draws for next edits: the lines (1-based) with our gutter mark, and the
 * decorations' after-texts and struck-through texts with their lines. */
export async function nextEditView(page) {
  return page.evaluate(() => {
    const editor = document.querySelector('.editor-instance .monaco-editor');
    if (!editor) {
      return { marks: [], after: [], struck: [] };
    }
    const lineOfTop = new Map();
    for (const row of editor.querySelectorAll('.margin-view-overlays > div')) {
      const number = row.querySelector('.line-numbers')?.textContent?.trim();
      if (number) {
        lineOfTop.set(row.style.top, Number(number));
      }
    }
    // Gutter icons are widgets of their own, placed at their line's top.
    const marks = [...editor.querySelectorAll('.glyph-margin-widgets .cgmr')]
      .filter((el) => getComputedStyle(el).backgroundImage.includes('next-edit.svg'))
      .map((el) => lineOfTop.get(el.style.top));
    const after = [];
    const struck = [];
    for (const line of editor.querySelectorAll('.view-lines .view-line')) {
      const number = lineOfTop.get(line.style.top);
      for (const span of line.querySelectorAll('span span')) {
        const own = getComputedStyle(span, '::after').content;
        if (own && own !== 'none' && own !== 'normal') {
          after.push({ line: number, text: JSON.parse(own) });
        }
        if (getComputedStyle(span).textDecorationLine.includes('line-through')) {
          struck.push({ line: number, text: span.textContent.replace(/\u00a0/g, ' ') });
        }
      }
    }
    return { marks, after, struck };
  });
}

/** The cursor's line and column (1-based), from the status bar's "Ln 6, Col 11". */
export async function cursor(page) {
  const text = await page
    .locator('.statusbar-item', { hasText: /Ln \d+, Col \d+/ })
    .first()
    .textContent();
  const [, line, column] = text.match(/Ln (\d+), Col (\d+)/);
  return { line: Number(line), column: Number(column) };
}

/** Polls the view until `ok(view)`; the view then, or throws what it last was. */
export async function waitView(page, what, ok, waitMs) {
  const deadline = Date.now() + waitMs;
  let view;
  while (Date.now() < deadline) {
    view = await nextEditView(page);
    if (ok(view)) {
      return view;
    }
    await page.waitForTimeout(200);
  }
  throw new Error(`${what}: not within ${waitMs} ms; the view was ${JSON.stringify(view)}`);
}
