"""The names of the engine's options, in one torch-free module.

The engine checks them (api.py, fast_runner.py, compiled.py, fim.py, types.py, model.py),
and the settings and the command line offer them (settings.py, cli.py) without importing
torch. "auto" is spelled out where a setting accepts it and the engine resolves it.
"""

from __future__ import annotations

from dataclasses import dataclass

AUTO = "auto"


@dataclass(frozen=True)
class MethodEntry:
    """A decoding method as registered: where its function lives and what it can use.

    The function is named, not imported, so that this module stays torch-free;
    ``api.method`` imports it when a request asks for it.
    """

    function: str  # "module:name", a ``request.Method``
    # It reads DecodeRequest.memory (longest matches over the user's code: proposals and
    # seeds); other methods get no memory, so none is looked up for them.
    takes_memory: bool = False


# The decoding methods, the one registry: settings, the command line and the engine read it.
METHOD_TABLE: dict[str, MethodEntry] = {
    "superposed": MethodEntry("superposed.superposed:superposed_decode", takes_memory=True),
    "greedy": MethodEntry("superposed.baselines:greedy"),
    "nucleus": MethodEntry("superposed.baselines:nucleus_batched"),
    "nucleus-sequential": MethodEntry("superposed.baselines:nucleus_sequential"),
    "beam": MethodEntry("superposed.baselines:beam_search"),
    "nucleus-superposed": MethodEntry("superposed.baselines:nucleus_superposed"),
}
METHODS = tuple(METHOD_TABLE)
DEVICES = (AUTO, "cpu", "cuda", "mps")  # auto: cuda, then mps, then cpu
DTYPES = (AUTO, "float32", "bfloat16", "float16")  # auto: bfloat16 on a GPU, else float32
# The fast runner's decode weights; auto (int4 on a CPU, bf16 on a GPU) is resolved by
# runner_choice.make_runner, so a FastRunner itself takes one of these.
PRECISIONS = ("fp32", "bf16", "int8", "int4")
QUANTIZED = ("int8", "int4")  # CPU-only kernels, with dense prefills (prefill.py)
PRECISION_CHOICES = (AUTO, *PRECISIONS)
# auto: the fast runner where it supports the model; llama.cpp (llama_cpp_runner.py) only
# when asked for: it needs the `llama` extra, which CI and `make setup` do not build.
RUNNERS = (AUTO, "hf", "fast", "llama.cpp")
COMPILE_MODES = ("background", "off")  # the fast runner's decode step compiled in a child
# Where superposed drafts leave the shared input for their own rows (superposed/rows.py).
BRANCHES = ("off", "first", "split")
MIXES = ("interpolate", "loglinear")  # how the n-gram probability joins the model's
FIM_MODES = (AUTO, "on", "off")  # fill-in-the-middle prompts
