/** What the server is doing, and how the status bar says it. Pure: no `vscode` import. */

export type ServerState =
  | { kind: 'starting' }
  | { kind: 'loading'; message?: string; percent?: number }
  | { kind: 'indexing'; message?: string; percent?: number }
  | { kind: 'ready'; model: string; k: number; stats?: Record<string, unknown>; step?: string }
  // `what`: the status bar's few words ("Python not found"); `message`: what to do
  | { kind: 'error'; message: string; what?: string }
  | { kind: 'stopped' };

export interface StatusView {
  text: string;
  tooltip: string;
}

/** The server's notification of its state (docs/architecture.md, "Status"). */
export const STATUS_NOTIFICATION = 'superposed/status';

/** The payload of superposed/status. */
export interface ServerStatus {
  state: 'loading' | 'indexing' | 'ready' | 'error';
  model: string; // the model loading, or loaded
  message?: string; // for people; the error's text when state is 'error'
  percent?: number; // 0..100, while loading (a conversion) or indexing
  step?: 'compiled' | 'graphs' | 'eager'; // when ready: the decode step (graphs: on CUDA)
}

/** The state a superposed/status stands for; `ready` builds the ready state (model, k, stats). */
export function stateOfStatus(status: ServerStatus, ready: () => ServerState): ServerState {
  switch (status.state) {
    case 'loading':
      return { kind: 'loading', message: status.message, percent: status.percent };
    case 'indexing':
      return { kind: 'indexing', message: status.message, percent: status.percent };
    case 'ready':
      return { ...ready(), ...(status.step ? { step: status.step } : {}) };
    case 'error':
      return {
        kind: 'error',
        what: 'the model did not load',
        message: status.message ?? 'The model did not load; see the log.',
      };
  }
}

function percent(value: number | undefined): string {
  return value === undefined ? '' : ` ${Math.round(value)}%`;
}

/** One line per stats entry, nested objects flattened with dots: `codebase.files: 12`. */
export function formatStats(stats: Record<string, unknown>, prefix = ''): string[] {
  const lines: string[] = [];
  for (const [key, value] of Object.entries(stats)) {
    const name = prefix === '' ? key : `${prefix}.${key}`;
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      lines.push(...formatStats(value as Record<string, unknown>, name));
    } else {
      lines.push(`${name}: ${JSON.stringify(value)}`);
    }
  }
  return lines;
}

/** The status bar item: what the server is doing in a few words, a short tooltip; the full
 * counters are behind Superposed: Show Details (the item's click), never in the bar. */
export function statusView(state: ServerState): StatusView {
  const details = 'Click for details.';
  switch (state.kind) {
    case 'starting':
      return {
        text: '$(loading~spin) Superposed: starting',
        tooltip: `Starting the server. ${details}`,
      };
    case 'loading':
      return {
        text: `$(loading~spin) Superposed: loading model${percent(state.percent)}`,
        tooltip: `${capital(state.message ?? 'loading the model')}; drafts start when it is ready. ${details}`,
      };
    case 'indexing':
      return {
        text: `$(sync~spin) Superposed: indexing${percent(state.percent)}`,
        tooltip: `Indexing the workspace for the drafts. ${details}`,
      };
    case 'ready': {
      // Until the compiled decode step is built (once per machine), drafts come slower: said
      // in plain words in the tooltip, never as "eager step" in the bar.
      const step = state.step ?? state.stats?.decodeStep;
      const slower =
        step === 'eager' ? ' The first drafts come slower while the model is optimized.' : '';
      return {
        text: `$(check) Superposed: ready (${state.model}, k=${state.k})`,
        tooltip: `Drafts from ${state.model}, ${state.k} at a time.${slower} ${details}`,
      };
    }
    case 'error':
      return {
        text: `$(error) Superposed: ${state.what ?? 'error'}`,
        tooltip: `${state.message} ${details}`,
      };
    case 'stopped':
      return {
        text: '$(circle-slash) Superposed: stopped',
        tooltip: 'The server is not running (Superposed: Restart Server).',
      };
  }
}

function capital(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Superposed: Show Details: the state in words, then every counter the server reports. */
export function detailsText(
  state: ServerState,
  stats: Record<string, unknown> | undefined,
): string {
  const view = statusView(state);
  const lines = [
    `# ${view.text.replace(/^\$\([^)]*\) /, '')}`,
    '',
    view.tooltip.replace(/ Click for details\.$/, ''),
    '',
  ];
  if (stats === undefined) {
    lines.push('No counters: the server is not running or has not answered yet.');
  } else {
    lines.push('## What the server reports', '', ...formatStats(stats));
  }
  return `${lines.join('\n')}\n`;
}
