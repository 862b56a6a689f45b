"""What travels to the device for bench/gpu.py's run (issue 37), made and rehearsed here.

The image has no registry and lacks what the tree needs besides torch (pygls, the store, the
grammars; its transformers is too old), and the weights cannot travel. So, here:

    python -m bench.gpu prepare        # -> bench/results/tmp/gpu-carry (about 45 MB)

packs each embedded model's config and tokenizer (shapes.tar.xz) and the wheels of
DEVICE_WHEELS at the versions installed here; bench/gpu.sh installs them on the device. Rehearse
that here first (about 6 minutes): gpu.sh in a venv of only the image's packages
(IMAGE_PACKAGES) and the wheels, every step on the CPU, so that a missing wheel costs no device
time (the first device call, 2026-12-04, lost its run to one):

    python -m bench.gpu rehearse       # gpu.sh's exit code; results in /tmp/gpu-rehearsal/out
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from bench.measure import RESULTS, ROOT
from superposed.embedded import EMBEDDED

SHAPES_DIR = RESULTS / "tmp" / "gpu-shapes"  # the configs and tokenizers (gitignored)
CARRY_DIR = RESULTS / "tmp" / "gpu-carry"  # what travels: SHAPES_DIR packed, and the wheels
CARRY_LIMIT = 50 * 2**20  # the device's 64 MiB, less the tracked tree (12 MiB) and 2 to spare
# What the image lacks (pygls, the store, the grammars) or may have too old (its transformers is
# 5.17, we need >=5.18, with the huggingface-hub, regex and pytest those need), pinned to this
# machine's versions. Left to the image: torch (its CUDA build), numpy, tokenizers, safetensors.
DEVICE_WHEELS = (
    "transformers", "kernels", "tomlkit", "huggingface_hub", "httpx2", "httpcore2", "truststore",
    "regex", "click", "typing_extensions", "pygls", "lsprotocol", "cattrs", "attrs",
    "sqlite-utils", "sqlite-fts4", "click-default-group", "platformdirs", "pydivsufsort",
    "pytest", "pluggy", "pytest-lsp", "pytest-asyncio", "tree-sitter", "tree-sitter-language-pack",
)  # fmt: skip
DEVICE_PYTHON = "3.12"  # the image's python3 (/opt/torch/.venv)
# The image's own packages that our code or the wheels above import (its list, 2026-11-17),
# at its versions where a carried wheel checks them: ``rehearse``'s venv holds these alone.
IMAGE_PACKAGES = (
    "numpy", "tokenizers==0.23.2", "safetensors==0.8.0", "accelerate==1.15.0", "pyyaml", "tqdm",
    "filelock", "packaging", "fsspec", "pathspec", "jinja2", "anyio", "idna", "h11", "certifi",
    "hypothesis", "pytest-timeout", "iniconfig", "pygments", "psutil", "sympy", "networkx",
    "typer", "rich", "sortedcontainers", "tabulate", "python-dateutil",
)  # fmt: skip
REHEARSAL_DIR = Path("/tmp/gpu-rehearsal")
WEIGHT_SUFFIXES = (".safetensors", ".safetensors.index.json", ".bin", ".gguf")  # left behind


def prepare(into: Path) -> dict[str, Path]:
    """Each embedded model's config and tokenizer, without its weights, under ``into``."""
    from superposed.model import embedded_model_dir

    out = {}
    for name, model in EMBEDDED.items():
        source = embedded_model_dir(model)
        target = into / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for path in source.iterdir():
            if path.is_file() and not path.name.endswith(WEIGHT_SUFFIXES):
                shutil.copyfile(path, target / path.name)
        out[name] = target
    return out


def wheel_pins() -> list[str]:
    """``name==version`` of each of DEVICE_WHEELS and of the grammar wheels the language pack
    requires, as installed here. The grammars are read from the pack's own metadata: a name
    listed by hand here once failed CI on a fresh machine, where the pack no longer pulled it."""
    from importlib.metadata import requires, version

    grammars = [
        re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0]
        for requirement in requires("tree-sitter-language-pack") or ()
        if "extra ==" not in requirement
    ]
    names = dict.fromkeys([*DEVICE_WHEELS, *grammars])  # in order, once each
    return [f"{name}=={version(name)}" for name in names]


def pack(shapes: Path, carry: Path, python: str = DEVICE_PYTHON) -> int:
    """``carry``: ``shapes`` as shapes.tar.xz and the wheels for ``python`` (the device's; this
    machine's for a rehearsal in a venv of the image's packages); its size in bytes, refused
    past CARRY_LIMIT (the call would not travel)."""
    import tarfile

    shutil.rmtree(carry, ignore_errors=True)
    (carry / "wheels").mkdir(parents=True)
    with tarfile.open(carry / "shapes.tar.xz", "w:xz") as tar:
        tar.add(shapes, arcname=SHAPES_DIR.name)
    platforms = [f"--platform=manylinux{tag}_x86_64" for tag in
                 ("_2_28", "_2_27", "_2_24", "_2_17", "2014", "1")]  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
         f"--python-version={python}", "--implementation=cp", *platforms,
         f"--dest={carry / 'wheels'}", *wheel_pins()],
        check=True,
    )  # fmt: skip
    size = sum(path.stat().st_size for path in carry.rglob("*") if path.is_file())
    if size > CARRY_LIMIT:
        raise SystemExit(f"{carry} is {size / 2**20:.1f} MiB, over the {CARRY_LIMIT / 2**20:.0f} "
                         "MiB that may travel beside the tree: carry fewer wheels")  # fmt: skip
    return size


def rehearse(shapes: Path, at: Path = REHEARSAL_DIR) -> int:
    """gpu.sh as the device runs it, on the CPU: a venv of IMAGE_PACKAGES and this machine's
    torch, the wheels packed for this python, every step on ``shapes``; gpu.sh's exit code
    (a missing wheel shows up here, not in device time)."""
    import venv

    venv.create(at / "venv", with_pip=True, clear=True)
    python = str(at / "venv" / "bin" / "python")
    torch_pin = f"torch=={torch.__version__.split('+')[0]}"  # the CPU wheel this pip offers
    subprocess.run([python, "-m", "pip", "install", "-q", torch_pin, *IMAGE_PACKAGES], check=True)
    pack(shapes, at / "carry", f"{sys.version_info.major}.{sys.version_info.minor}")
    env = {**os.environ, "CARRY": str(at / "carry"), "SITE": str(at / "site")}
    env.update(PYTHON=python, OUT=str(at / "out"), PYTHONPATH="")
    command = ["sh", str(ROOT / "bench" / "gpu.sh"), "--device", "cpu", "--shapes", str(shapes)]
    return subprocess.run(command, env=env, cwd=ROOT).returncode
