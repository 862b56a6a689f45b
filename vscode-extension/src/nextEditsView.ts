/**
 * Next edits in the editor: the gutter mark and the hint at the next site, the edit's preview
 * at the site the cursor is at, the context keys that make Tab jump or accept and Esc dismiss,
 * and Superposed: List Next Edits. The logic is in nextEdits.ts; this file draws and applies.
 *
 * Stable API only: decorations (a gutter icon, after-text, a line-through) rather than the
 * proposed inline-edit API, which an extension in the Marketplace cannot use.
 */
import * as vscode from 'vscode';

import {
  ACCEPTED_COMMAND,
  DISMISSED_COMMAND,
  editPicks,
  fresh,
  hintText,
  isInsert,
  type NextEdit,
  oneLine,
  parseEdits,
  siteAt,
  type Span,
  target,
  throughChanges,
} from './nextEdits';
import { endOfInsert } from './picks';
import type { Server } from './server';

const PENDING_KEY = 'superposed.nextEditPending';
const AT_SITE_KEY = 'superposed.nextEditAtSite';

function toRange(span: Span): vscode.Range {
  return new vscode.Range(span.start.line, span.start.character, span.end.line, span.end.character);
}

/** One spelling per URI: VS Code's (the server may percent-encode a path otherwise). */
export function normalizeUri(uri: string): string {
  try {
    return vscode.Uri.parse(uri, true).toString();
  } catch {
    return uri;
  }
}

function openDocument(uri: string): vscode.TextDocument | undefined {
  return vscode.workspace.textDocuments.find((document) => document.uri.toString() === uri);
}

/** The text of `span` in an open document; undefined where it is not open, null past its end. */
function textAt(uri: string, span: Span): string | undefined | null {
  const document = openDocument(uri);
  if (document === undefined) {
    return undefined;
  }
  const range = toRange(span);
  return document.validateRange(range).isEqual(range) ? document.getText(range) : null;
}

export class NextEditsView implements vscode.Disposable {
  /** The latest proposals (a notification replaces them all), best first. */
  private edits: NextEdit[] = [];
  /** The ids dismissed here: a notification already on its way may propose them again. */
  private readonly dismissed = new Set<string>();
  private readonly mark: vscode.TextEditorDecorationType;
  private readonly hint: vscode.TextEditorDecorationType;
  private readonly removed: vscode.TextEditorDecorationType;
  private readonly added: vscode.TextEditorDecorationType;
  private readonly inserted: vscode.TextEditorDecorationType;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly srv: Server,
    private readonly output: vscode.LogOutputChannel,
    context: vscode.ExtensionContext,
  ) {
    this.mark = vscode.window.createTextEditorDecorationType({
      gutterIconPath: context.asAbsolutePath('media/next-edit.svg'),
      gutterIconSize: 'contain',
      overviewRulerColor: new vscode.ThemeColor('editorGutter.addedBackground'),
      overviewRulerLane: vscode.OverviewRulerLane.Right,
    });
    this.hint = vscode.window.createTextEditorDecorationType({
      after: {
        color: new vscode.ThemeColor('editorCodeLens.foreground'),
        fontStyle: 'italic',
        margin: '0 0 0 1em',
      },
    });
    this.removed = vscode.window.createTextEditorDecorationType({
      textDecoration: 'line-through',
      backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
    });
    this.added = vscode.window.createTextEditorDecorationType({
      after: {
        backgroundColor: new vscode.ThemeColor('diffEditor.insertedTextBackground'),
        border: '1px solid',
        borderColor: new vscode.ThemeColor('diffEditor.insertedLineBackground'),
      },
    });
    this.inserted = vscode.window.createTextEditorDecorationType({
      after: { color: new vscode.ThemeColor('editorGhostText.foreground') },
    });
    this.disposables.push(
      this.mark,
      this.hint,
      this.removed,
      this.added,
      this.inserted,
      vscode.window.onDidChangeTextEditorSelection(() => this.refresh()),
      vscode.window.onDidChangeActiveTextEditor(() => this.refresh()),
      vscode.window.onDidChangeVisibleTextEditors(() => this.refresh()),
      vscode.workspace.onDidChangeTextDocument((event) => {
        if (event.contentChanges.length > 0 && this.edits.length > 0) {
          this.edits = throughChanges(
            this.edits,
            event.document.uri.toString(),
            event.contentChanges,
          );
          this.refresh();
        }
      }),
      vscode.commands.registerCommand('superposed.jumpToNextEdit', () => this.jump()),
      vscode.commands.registerCommand('superposed.acceptNextEdit', () => this.accept()),
      vscode.commands.registerCommand('superposed.dismissNextEdit', () => this.dismiss()),
      vscode.commands.registerCommand('superposed.listNextEdits', () => this.list()),
    );
  }

  dispose(): void {
    this.disposables.forEach((d) => d.dispose());
  }

  /** superposed/nextEditsReady: the proposals after the latest change, in place of the others. */
  ready(params: unknown): void {
    this.edits = parseEdits(params, normalizeUri, this.dismissed);
    this.output.info(`next edits ready: ${JSON.stringify(this.edits.map((e) => e.label))}`);
    this.refresh();
  }

  /** The server stopped: nothing it proposed can be accepted. */
  clear(): void {
    this.edits = [];
    this.refresh();
  }

  /** Drops stale edits, then redraws every visible editor and sets the context keys. */
  private refresh(): void {
    this.edits = fresh(this.edits, textAt);
    const active = vscode.window.activeTextEditor;
    const here = active && this.cursorOf(active);
    const site = here && siteAt(this.edits, here.uri, here.pos);
    const next = here && target(this.edits, here.uri, here.pos);
    for (const editor of vscode.window.visibleTextEditors) {
      const uri = editor.document.uri.toString();
      const isActive = editor === active;
      const shown = isActive ? (site ?? next) : this.edits.find((e) => e.textDocument.uri === uri);
      this.draw(editor, shown, isActive && site !== undefined);
    }
    void vscode.commands.executeCommand('setContext', PENDING_KEY, (site ?? next) !== undefined);
    void vscode.commands.executeCommand('setContext', AT_SITE_KEY, site !== undefined);
  }

  private cursorOf(editor: vscode.TextEditor): { uri: string; pos: vscode.Position } {
    return { uri: editor.document.uri.toString(), pos: editor.selection.active };
  }

  /** The gutter mark and hint at `edit`'s site; its preview too when the cursor is at it. */
  private draw(editor: vscode.TextEditor, edit: NextEdit | undefined, preview: boolean): void {
    const none: vscode.DecorationOptions[] = [];
    if (edit === undefined) {
      [this.mark, this.hint, this.removed, this.added, this.inserted].forEach((type) =>
        editor.setDecorations(type, none),
      );
      return;
    }
    const range = toRange(edit.range);
    const line = editor.document.lineAt(range.end.line);
    editor.setDecorations(this.mark, [{ range: new vscode.Range(range.start, range.start) }]);
    editor.setDecorations(this.hint, [
      {
        range: new vscode.Range(line.range.end, line.range.end),
        renderOptions: { after: { contentText: hintText(edit, preview) } },
      },
    ]);
    const after = (text: string): vscode.DecorationOptions => ({
      range: new vscode.Range(range.end, range.end),
      renderOptions: { after: { contentText: oneLine(text) } },
    });
    if (!preview) {
      [this.removed, this.added, this.inserted].forEach((type) =>
        editor.setDecorations(type, none),
      );
    } else if (isInsert(edit)) {
      editor.setDecorations(this.removed, none);
      editor.setDecorations(this.added, none);
      editor.setDecorations(this.inserted, [after(edit.newText)]);
    } else {
      editor.setDecorations(this.removed, [{ range, hoverMessage: edit.label }]);
      editor.setDecorations(this.added, [after(edit.newText)]);
      editor.setDecorations(this.inserted, none);
    }
  }

  /** Tab away from a site: the cursor to the best next site in this file. */
  private jump(): void {
    const editor = vscode.window.activeTextEditor;
    const here = editor && this.cursorOf(editor);
    const edit = here && target(this.edits, here.uri, here.pos);
    if (editor !== undefined && edit !== undefined) {
      this.reveal(editor, edit);
    }
  }

  private reveal(editor: vscode.TextEditor, edit: NextEdit): void {
    const start = toRange(edit.range).start;
    editor.selection = new vscode.Selection(start, start);
    editor.revealRange(toRange(edit.range), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    this.output.info(`next edit: jumped to ${this.where(edit)}`);
  }

  /** Tab at a site: the edit goes in as a normal text edit, then the server hears of it. */
  private async accept(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const here = editor && this.cursorOf(editor);
    const edit = here && siteAt(fresh(this.edits, textAt), here.uri, here.pos);
    if (editor === undefined || edit === undefined) {
      return;
    }
    this.edits = this.edits.filter((e) => e.id !== edit.id);
    const range = toRange(edit.range);
    const change = new vscode.WorkspaceEdit();
    change.replace(editor.document.uri, range, edit.newText);
    if (!(await vscode.workspace.applyEdit(change))) {
      this.output.info(`next edit not applied: ${this.where(edit)}`);
      this.refresh();
      return;
    }
    const end = endOfInsert(range.start.line, range.start.character, edit.newText);
    const cursor = new vscode.Position(end.line, end.character);
    editor.selection = new vscode.Selection(cursor, cursor);
    this.output.info(`next edit accepted: ${this.where(edit)} ${JSON.stringify(edit.newText)}`);
    this.refresh();
    await this.tell(ACCEPTED_COMMAND, edit);
  }

  /** Esc at a site: its edit goes, and the server stops proposing it. Away from a site Esc keeps
   * its meaning (a Vim extension's Normal mode, closing a widget); the next proposals after a
   * change replace the pending ones anyway. */
  private async dismiss(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const here = editor && this.cursorOf(editor);
    const edit = here && siteAt(this.edits, here.uri, here.pos);
    if (edit === undefined) {
      return;
    }
    this.dismissed.add(edit.id);
    this.edits = this.edits.filter((e) => e.id !== edit.id);
    this.output.info(`next edit dismissed: ${this.where(edit)}`);
    this.refresh();
    await this.tell(DISMISSED_COMMAND, edit);
  }

  private async tell(command: string, edit: NextEdit): Promise<void> {
    try {
      await this.srv.execute(command, { id: edit.id });
    } catch (err) {
      this.output.info(`${command} failed: ${String(err)}`);
    }
  }

  private where(edit: NextEdit): string {
    const file = vscode.workspace.asRelativePath(vscode.Uri.parse(edit.textDocument.uri));
    return `${file}:${edit.range.start.line + 1}:${edit.range.start.character + 1}`;
  }

  /**
   * Superposed: List Next Edits: every pending edit in a quick pick, checked against its file
   * (opened, unshown, where it is not open); picking one jumps there. The server is asked for
   * the edits at the cursor first (superposed/nextEdits); without an answer, the pending ones.
   */
  private async list(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (editor !== undefined) {
      try {
        const answer = await this.srv.nextEdits(editor.document, editor.selection.active);
        this.edits = parseEdits(answer, normalizeUri, this.dismissed);
      } catch (err) {
        this.output.info(`superposed/nextEdits failed: ${String(err)}`);
      }
    }
    for (const uri of new Set(this.edits.map((edit) => edit.textDocument.uri))) {
      if (openDocument(uri) === undefined) {
        await vscode.workspace.openTextDocument(vscode.Uri.parse(uri)).then(undefined, () => {
          this.edits = this.edits.filter((edit) => edit.textDocument.uri !== uri); // gone
        });
      }
    }
    this.refresh();
    this.output.info(`list next edits: ${JSON.stringify(this.edits.map((e) => e.label))}`);
    if (this.edits.length === 0) {
      void vscode.window.showInformationMessage('Superposed: no next edits.');
      return;
    }
    const picks = editPicks(this.edits, (uri) =>
      vscode.workspace.asRelativePath(vscode.Uri.parse(uri)),
    );
    const picked = await vscode.window.showQuickPick(picks, {
      title: 'Superposed: next edits',
      placeHolder: 'Pick one to jump there (Tab accepts it, Esc dismisses it)',
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (picked === undefined) {
      return;
    }
    const document = await vscode.workspace.openTextDocument(
      vscode.Uri.parse(picked.edit.textDocument.uri),
    );
    this.reveal(await vscode.window.showTextDocument(document), picked.edit);
  }
}
