/** What the server is doing, and how the status bar says it. Pure: no `vscode` import. */

export type ServerState =
  | { kind: 'starting' }
  | { kind: 'loading'; percent?: number }
  | { kind: 'indexing'; percent?: number }
  | { kind: 'ready'; model: string; k: number; stats?: Record<string, unknown>; step?: string }
  | { kind: 'error'; message: string }
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
  percent?: number; // 0..100, while indexing
  step?: 'compiled' | 'graphs' | 'eager'; // when ready: the decode step (graphs: on CUDA)
}

/** The state a superposed/status stands for; `ready` builds the ready state (model, k, stats). */
export function stateOfStatus(status: ServerStatus, ready: () => ServerState): ServerState {
  switch (status.state) {
    case 'loading':
      return { kind: 'loading' };
    case 'indexing':
      return { kind: 'indexing', percent: status.percent };
    case 'ready':
      return { ...ready(), ...(status.step ? { step: status.step } : {}) };
    case 'error':
      return { kind: 'error', message: status.message ?? 'The model did not load; see the log.' };
  }
}

/** The stats entries worth a tooltip line (the settings echo is left out). */
const TOOLTIP_KEYS = [
  'model',
  'ready',
  'error',
  'decodeStep',
  'compiledStep',
  'stores',
  'counters',
];

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

export function statusView(state: ServerState): StatusView {
  switch (state.kind) {
    case 'starting':
      return { text: '$(loading~spin) Superposed: starting', tooltip: 'Starting the server' };
    case 'loading':
      return {
        text: `$(loading~spin) Superposed: loading model${percent(state.percent)}`,
        tooltip: 'Loading the language model; completions start when it is ready',
      };
    case 'indexing':
      return {
        text: `$(sync~spin) Superposed: indexing${percent(state.percent)}`,
        tooltip: 'Indexing the workspace into the codebase n-gram store',
      };
    case 'ready': {
      const shown = Object.fromEntries(
        Object.entries(state.stats ?? {}).filter(([key]) => TOOLTIP_KEYS.includes(key)),
      );
      const stats = formatStats(shown);
      // Until the compiled decode step is built (once per machine), drafts come slower.
      const step = state.step ?? state.stats?.decodeStep;
      const eager = step === 'eager' ? ', eager step' : '';
      return {
        text: `$(check) Superposed: ready (${state.model}, k=${state.k}${eager})`,
        tooltip: ['Superposed: ready. Click for the log.', ...stats].join('\n'),
      };
    }
    case 'error':
      return {
        text: '$(error) Superposed: error',
        tooltip: `${state.message}\nClick for the log.`,
      };
    case 'stopped':
      return { text: '$(circle-slash) Superposed: stopped', tooltip: 'The server is not running' };
  }
}
