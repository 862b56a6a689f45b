"""Typed server settings with defaults, parsed from the client's ``superposed`` section.

Clients send one flat camelCase object (the same names in VS Code's ``superposed.*``
settings, Neovim's ``settings`` table and ``initializationOptions``):

    {"model": "smollm2-135m", "k": 3, "method": "superposed", "lineMode": "auto", ...}

Parsing never fails: each invalid value is reported (the message names the key, the value
and what is allowed) and that one setting keeps its default, so the server keeps serving.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from lsp_server.device_model import device_default_model
from lsp_server.setting_values import (
    InvalidSetting,
    _bool,
    _Choice,
    _Float,
    _Int,
    _lambdas,
    _model_name,
    _non_finite,
    _optional_path,
    _orders,
    _PromptTokens,
    index_folders,
)
from lsp_server.triggers import MID_LINE, TRIGGERS, TriggerSettings
from ngram_db.files import DEFAULT_MAX_FILE_BYTES
from superposed.embedded import DEFAULT_MODEL
from superposed.ngram import DEFAULT_LAMBDAS
from superposed.options import (
    COMPILE_MODES,
    DEVICES,
    DTYPES,
    FIM_MODES,
    METHODS,
    PRECISION_CHOICES,
    RUNNERS,
)
from superposed.types import DecodeConfig, Setting

SECTION = "superposed"
LINE_MODES = ("single", "multi", "auto")
# Where next edits look for sites (lsp_server/next_edits/proposals.py reads it from here).
NEXT_EDIT_SCOPES = ("file", "open", "workspace")
DEFAULT_DEBOUNCE_MS = 0
DEFAULT_ANSWER_WITHIN_MS = 250  # bench/results/cold_request-deadline.md, deadline_replay.json


@dataclass
class ModelSettings:
    """Which language model runs, and where."""

    # An embedded model (superposed/embedded.py), a GGUF file's path, an Ollama model
    # ("ollama:qwen2.5-coder:1.5b"; superposed/own_model.py), a local directory, or
    # "tiny-random". Not set: SmolLM2, or Gemma 3 on a GPU where a device run measured it
    # fast enough there (lsp_server/device_model.py).
    model: str = DEFAULT_MODEL
    device: str = "auto"  # auto | cpu | cuda | mps
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    # The fast Llama-family runner's decode weights; auto: int4 on CPU, bf16 on a GPU.
    precision: str = "auto"  # auto | fp32 | bf16 | int8 | int4
    # auto (fast where it applies) | hf (the reference) | fast | llama.cpp (llama.cpp's
    # kernels on the GGUF: needs the `llama` extra, `make bench-llama`; opt-in)
    runner: str = "auto"
    threads: int = 1  # CPU threads: two on a busy 2-core machine measured 3-35x slower
    # (0: the counts calibrated at the first load on this CPU, one for decode steps and one
    # for long prefills, superposed/calibrate.py)
    # background: a child process compiles the fast runner's decode step (cached on disk),
    # used once it is ready; off: always eager.
    compile: str = "background"  # background | off
    # int8/int4: keep a bf16 copy of the layers for long prefills (about 10% faster on 200
    # tokens, 2% on 1,500; 200 MB more on the default model) instead of de-quantizing a layer
    # at a time as a prefill runs.
    prefill_copy: bool = False


@dataclass
class DecodingSettings(DecodeConfig):
    """How the k drafts are decoded: the engine's DecodeConfig (its fields and defaults are
    the settings' own: k, maxNewTokens, alpha, mix, temperature, memorySeed, branch, ...),
    and what the server decides around the engine. ``k`` is the drafts shown
    (completion.decode_config asks the engine for spares)."""

    method: str = "superposed"  # one of METHODS
    # Longest matches over the stores' files and the open documents propose and weigh
    # candidates (lsp_server/stores/match_indexes.py, superposed/memory.py). On the replay it lifts
    # edit
    # similarity@3 at the line start and mid-line over the same server without it
    # (bench/results/replay.json, docs/benchmarks.md).
    memory: bool = True
    # Drafts that differ only in a trailing comment, whitespace or punctuation count as one
    # (the better-ranked kept) and the next distinct draft takes the freed slot; off: the
    # paper's drafts as decoded, which stay close by design.
    distinct_drafts: bool = True
    # A shown draft the language cannot go on from (brackets or a quote it breaks, a line
    # the budget cut, the next line repeated, a syntax error the cursor's line did not
    # have: lsp_server/completion/wellformed.py) is dropped and the next draft takes its slot; off:
    # the drafts as decoded (a language or dialect the rules misjudge).
    well_formed: bool = True
    lambdas: dict[int, float] = field(default_factory=lambda: dict(DEFAULT_LAMBDAS))
    # single: each draft ends at the end of its first line; multi: every draft may be a
    # block of lines; auto: the syntax at the cursor decides (lsp_server/completion/syntax.py): a
    # block
    # after a block opener, in an empty body or on a blank line outside brackets, a line
    # mid-line or inside an unfinished expression. A block ends where its indentation leaves
    # the block, before a line that repeats the text after the cursor, at two blank lines,
    # or after max_lines lines (completion.block_stop).
    line_mode: str = "auto"
    # Lines of a block draft at most. Its token budget is max_new_tokens per line, at most
    # completion.BLOCK_MAX_TOKENS, and a draft the budget stops mid-line ends at its last
    # whole line.
    max_lines: int = 8
    # Fill-in-the-middle prompt (the text after the cursor too): auto: for a tokenizer with
    # FIM tokens, unless the model is known not to be trained for FIM (SmolLM; superposed/fim.py);
    # on: whenever the tokenizer has FIM tokens; off: always left to right.
    fim: str = "auto"
    # Prompt tokens at most (the most recent ones); 0: all the model's context. A prompt's
    # first prefill costs ~6 ms per token on a 2-core CPU with the default model (about 6 s
    # at 1024); nearby requests then reuse it (bench/results/lsp_latency.md).
    max_prompt_tokens: int = 1024
    # When the KV cache lacks more than this many tokens of the prompt (a file just opened or
    # switched to), the request's prompt is only the most recent this many tokens, and the
    # engine extends the cache to the full window in the background between requests; the
    # cache is also warmed on didOpen/didChange (lsp_server/runtime/warmup.py). 0: always the full
    # window on the request path. 256 made the first request's p50 about a third of the full
    # window's (bench/results/lsp_latency.md); 128, with the deadline, 0.57x 256's at the same
    # first-answer quality at line starts and -0.033 edit similarity@3 mid-line, chosen on the
    # validation split (bench/results/replay_first_window_deadline_validation.json; the test
    # split: replay_first_window_deadline.json).
    first_prompt_tokens: int = 128
    # Milliseconds a request waits for a newer one for the same document before decoding
    # (a newer one replaces it unanswered); 0: decode at once. Measured by
    # bench/results/lsp_debounce.md (bench/results/README.md has its command): a debounce
    # saves model calls only when longer than the time between keystrokes (typing every
    # 150 ms: 200 cut them from 56 to 1 per line, 150 only to 32), the wait after the last
    # keystroke did not improve (superseded decodes stop at their next step), and every
    # answer after a pause comes that much later. So 0: 150-200 spends less CPU while typing.
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    # Milliseconds from a request's arrival within which it answers: the drafts as far as
    # they got then (at least completion.decode.DEADLINE_MIN_TOKENS tokens), and the server
    # decodes the rest at once into the typing-along cache, which the next keystroke along a
    # draft reads; 0: no deadline. bench/results/cold_request-deadline.md and
    # deadline_replay.json measured the default.
    answer_within_ms: int = DEFAULT_ANSWER_WITHIN_MS


@dataclass
class StoreSettings:
    """The codebase and user n-gram stores."""

    orders: tuple[int, ...] = tuple(sorted(DEFAULT_LAMBDAS))
    codebase_db: str | None = None  # None: the default path under the cache directory
    user_db: str | None = None  # None: the default path under the user data directory
    user_store: bool = True  # learn what the user saves and accepts across codebases
    user_weight: float = 0.3  # weight of the user store against the codebase store
    index_on_save: bool = True
    # Saved files larger than this (UTF-8 bytes) are not learned: index-repo's default limit.
    # Uncapped, one 20 MB save took 34 s, 2.8 GB at peak and kept 1.7 GB
    # (bench/results/save_cost.json: python -m bench.save_cost).
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    # Read-only infini-gram indexes of other repositories (index-repo --engine infini-gram),
    # more memory sources beside the stores (lsp_server/stores/shared_indexes.py); docs/scale.md.
    shared_indexes: tuple[str, ...] = ()
    # Milliseconds one request's shared-index lookups may spend together; after it, the shared
    # indexes answer nothing for that request (the stores and documents still do). 50: one
    # lookup costs 46 ms at p50 on the replay's 21-shard index (2 CPUs), so a request gets
    # the prompt's match and little more; unbudgeted, a request took 2.55x the store-only
    # p50 without lifting the drafts, with 50 it took 0.98x (bench/results/replay_shared_*).
    shared_budget_ms: int = 50
    # Scales the memory's lambda for a match that came from a shared index (1.0: as a store
    # match; 0: the shared indexes are not asked). Tuned on the validation split: ES@3 51.6 at
    # 1.0, 51.2 at 0.5, 51.0 at 0.25, 50.1 without the index
    # (bench/results/replay_shared_weight.json).
    shared_weight: float = 1.0


@dataclass
class NextEditSettings:
    """Next edits: the user's last edit proposed where it applies next (lsp_server/next_edits)."""

    # superposed/nextEdits answers and superposed/nextEditsReady is sent. Off by default:
    # on the test split of bench/results/next_edits.json the proposals were not precise
    # enough (issue 35's rule: on only at precision >= 85% and <= 2 false alarms in 100)
    on: bool = False
    # Where sites are looked for: the edited document, the open documents, or also the
    # workspace's files in the codebase store.
    scope: str = "open"  # file | open | workspace


@dataclass
class Settings:
    model: ModelSettings = field(default_factory=ModelSettings)
    decoding: DecodingSettings = field(default_factory=DecodingSettings)
    stores: StoreSettings = field(default_factory=StoreSettings)
    triggers: TriggerSettings = field(default_factory=TriggerSettings)
    next_edits: NextEditSettings = field(default_factory=NextEditSettings)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _parser(spec: Setting, default: Any) -> Callable[[Any], Any]:
    """The parser of a DecodeConfig field from its ``setting`` spec and its default's type."""
    if spec.choices:
        return _Choice(spec.choices)
    if isinstance(default, bool):
        return _bool
    assert spec.low is not None and spec.high is not None, "a number setting needs its bounds"
    if isinstance(default, int):
        return _Int(int(spec.low), int(spec.high))
    return _Float(spec.low, spec.high, open_low=spec.open_low)


def _engine_rows() -> dict[str, tuple[str, str, Callable[[Any], Any]]]:
    """The table's rows of the engine's fields that clients may set (superposed.types.setting):
    a new engine setting is declared on DecodeConfig and needs no row here."""
    rows: dict[str, tuple[str, str, Callable[[Any], Any]]] = {}
    for spec_field in fields(DecodeConfig):
        spec = spec_field.metadata.get("setting")
        if spec is not None:
            parse = _parser(spec, spec_field.default)
            rows[_camel(spec_field.name)] = ("decoding", spec_field.name, parse)
    return rows


# camelCase key -> (group, field, parser); each key's words: lsp_server/pages/settings_docs.py
_FIELDS: dict[str, tuple[str, str, Callable[[Any], Any]]] = {
    "model": ("model", "model", _model_name),
    "device": ("model", "device", _Choice(DEVICES)),
    "dtype": ("model", "dtype", _Choice(DTYPES)),
    "precision": ("model", "precision", _Choice(PRECISION_CHOICES)),
    "runner": ("model", "runner", _Choice(RUNNERS)),
    "threads": ("model", "threads", _Int(0, 64)),
    "compile": ("model", "compile", _Choice(COMPILE_MODES)),
    "prefillCopy": ("model", "prefill_copy", _bool),
    **_engine_rows(),  # k, maxNewTokens, alpha, mix, temperature, memorySeed, branch, ...
    "method": ("decoding", "method", _Choice(METHODS)),
    "memory": ("decoding", "memory", _bool),
    "distinctDrafts": ("decoding", "distinct_drafts", _bool),
    "wellFormed": ("decoding", "well_formed", _bool),
    "lambdas": ("decoding", "lambdas", _lambdas),
    "lineMode": ("decoding", "line_mode", _Choice(LINE_MODES)),
    "maxLines": ("decoding", "max_lines", _Int(1, 64)),
    "fim": ("decoding", "fim", _Choice(FIM_MODES)),
    "maxPromptTokens": ("decoding", "max_prompt_tokens", _PromptTokens("all the model's context")),
    "debounceMs": ("decoding", "debounce_ms", _Int(0, 2000)),
    "answerWithinMs": ("decoding", "answer_within_ms", _Int(0, 10000)),
    "firstPromptTokens": (
        "decoding",
        "first_prompt_tokens",
        _PromptTokens("off: always the full window"),
    ),
    "orders": ("stores", "orders", _orders),
    "codebaseDb": ("stores", "codebase_db", _optional_path),
    "userDb": ("stores", "user_db", _optional_path),
    "userStore": ("stores", "user_store", _bool),
    "userWeight": ("stores", "user_weight", _Float(0.0, 1.0)),
    "indexOnSave": ("stores", "index_on_save", _bool),
    "maxFileBytes": ("stores", "max_file_bytes", _Int(1_000, 100_000_000)),
    "sharedIndexes": ("stores", "shared_indexes", index_folders),
    "sharedBudgetMs": ("stores", "shared_budget_ms", _Int(1, 60_000)),
    "sharedWeight": ("stores", "shared_weight", _Float(0.0, 1.0)),
    "trigger": ("triggers", "trigger", _Choice(TRIGGERS)),
    "minPrefixChars": ("triggers", "min_prefix_chars", _Int(0, 200)),
    "midLine": ("triggers", "mid_line", _Choice(MID_LINE)),
    "triggerOnAccept": ("triggers", "on_accept", _bool),
    "nextEdits": ("next_edits", "on", _bool),
    "nextEditsScope": ("next_edits", "scope", _Choice(NEXT_EDIT_SCOPES)),
}
KEYS = tuple(_FIELDS)
# Settings retired with what they switched on, each measured without gain (its results stay:
# bench/results/README.md): one a client still sends is named in one message and ignored.
RETIRED = {
    **dict.fromkeys(("knnWeight", "knnNeighbours", "knnTemperature"), "the kNN store"),
    **dict.fromkeys(("context", "contextTokens"), "the codebase in the prompt"),
    "definitionWeight": "the definitions' proposals",
    **dict.fromkeys(("distinctFirstLines", "firstWordCap"), "the slot caps"),
    "verify": "the verified drafts",
}
# Knobs the benchmarks turn to compare decoding choices, whose defaults are what they chose
# (docs/benchmarks.md): a client may send them flat, as ever, or inside one "research" object,
# the one entry VS Code's Settings UI shows for them (issue 53 item 5: at most 40 settings).
RESEARCH = ("method", "alpha", "mix", "temperature", "lambdas", "orders", "memorySeed",
            "branch", "distinctDrafts", "sharedWeight")  # fmt: skip
RESEARCH_KEY = "research"
# The editors' own settings, in the same section but never the server's: a client that sends
# its whole section (them too) is not told they are unknown.
CLIENT_KEYS = ("pythonPath", "languages", "trace.server", "trace")
# The settings that take one of a few names, and those names (camelCase key -> names).
CHOICES = {key: p.options for key, (_, _, p) in _FIELDS.items() if isinstance(p, _Choice)}


def section_of(options: Any) -> Mapping[str, Any]:
    """The ``superposed`` object of the client's options (``{"superposed": {...}}`` or the
    bare ``{...}``, from initializationOptions or didChangeConfiguration); else empty."""
    if not isinstance(options, Mapping):
        return {}
    inner = options.get(SECTION)
    if isinstance(inner, Mapping):
        return inner
    return options


def _flat(section: Mapping[str, Any], errors: list[str]) -> list[tuple[str, Any]]:
    """The section's (key, value) pairs with the research object's knobs among them (after
    the flat keys: the object wins) and the editors' own keys left out."""
    pairs = [(k, v) for k, v in section.items() if k not in (RESEARCH_KEY, *CLIENT_KEYS)]
    research = section.get(RESEARCH_KEY) or {}  # null: the defaults
    if not isinstance(research, Mapping):
        errors.append(f"invalid {SECTION}.{RESEARCH_KEY} = {research!r}: use an object of "
                      f"research knobs ({', '.join(RESEARCH)}); ignored")  # fmt: skip
        return pairs
    for key, value in research.items():
        if key in RESEARCH or key in RETIRED:
            pairs.append((key, value))
        else:
            errors.append(f"unknown setting {SECTION}.{RESEARCH_KEY}.{key} (research knobs: "
                          f"{', '.join(RESEARCH)})")  # fmt: skip
    return pairs


def parse_settings(options: Any) -> tuple[Settings, list[str]]:
    """Settings from the client's options, and one message per invalid or unknown value."""
    settings = Settings()
    errors: list[str] = []
    section = section_of(options)
    pairs = _flat(section, errors)
    for key, value in pairs:
        if key in RETIRED:
            errors.append(
                f"setting {SECTION}.{key} is retired with {RETIRED[key]}, which measured no "
                "gain (docs/benchmarks.md); it is ignored: remove it from your settings"
            )
            continue
        if key not in _FIELDS:
            errors.append(f"unknown setting {SECTION}.{key} (known: {', '.join(KEYS)})")
            continue
        if value is None and key not in ("codebaseDb", "userDb"):
            continue  # null means "the default"
        group, name, parse = _FIELDS[key]
        try:
            if _non_finite(value):  # JSON has no NaN or Infinity; Python's reader takes them
                raise InvalidSetting("use finite numbers (not NaN or Infinity)")
            setattr(getattr(settings, group), name, parse(value))
        except InvalidSetting as err:
            errors.append(f"invalid {SECTION}.{key} = {value!r}: {err}; using the default")
    given = {key: value for key, value in pairs}
    if given.get("model") is None:  # not set: the default follows the device (device_model)
        settings.model.model = device_default_model(settings.model.device)
    # Cross-field check: weights for orders the stores do not count are meaningless.
    lambdas, orders = settings.decoding.lambdas, settings.stores.orders
    extra = sorted(set(lambdas) - set(orders))
    if extra and "lambdas" in given:
        errors.append(
            f"invalid {SECTION}.lambdas: orders {extra} are not in {SECTION}.orders "
            f"{list(orders)}; using the weights of those orders only"
        )
    kept = {n: w for n, w in lambdas.items() if n in orders}
    settings.decoding.lambdas = kept or {n: DEFAULT_LAMBDAS.get(n, 0.1) for n in orders}
    return settings, errors


def to_dict(settings: Settings) -> dict[str, Any]:
    """The settings as the flat camelCase object clients send (for stats and logs)."""
    out: dict[str, Any] = {}
    for key, (group, name, _) in _FIELDS.items():
        value = getattr(getattr(settings, group), name)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, dict):
            value = {str(n): w for n, w in value.items()}
        out[key] = value
    return out
