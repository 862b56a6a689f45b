"""The names of the engine's options, in one torch-free module.

The engine checks them (api.py, fast_runner.py, compiled.py, fim.py, types.py, model.py),
and the settings and the command line offer them (settings.py, cli.py) without importing
torch. "auto" is spelled out where a setting accepts it and the engine resolves it.
"""

from __future__ import annotations

AUTO = "auto"
# Decoding methods (api.METHODS maps each to its function).
METHODS = ("superposed", "greedy", "nucleus", "nucleus-sequential", "beam", "nucleus-superposed")
DEVICES = (AUTO, "cpu", "cuda", "mps")  # auto: cuda, then mps, then cpu
DTYPES = (AUTO, "float32", "bfloat16", "float16")  # auto: bfloat16 on a GPU, else float32
# The fast runner's decode weights; auto (int4 on a CPU, bf16 on a GPU) is resolved by
# runners.make_runner, so a FastRunner itself takes one of these.
PRECISIONS = ("fp32", "bf16", "int8", "int4")
PRECISION_CHOICES = (AUTO, *PRECISIONS)
RUNNERS = (AUTO, "hf", "fast")  # auto: the fast runner where it supports the model
COMPILE_MODES = ("background", "off")  # the fast runner's decode step compiled in a child
MIXES = ("interpolate", "loglinear")  # how the n-gram probability joins the model's
FIM_MODES = (AUTO, "on", "off")  # fill-in-the-middle prompts
