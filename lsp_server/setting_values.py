"""The parsers of the settings' values (lsp_server/settings.py's table): each takes what the
client sent and returns the value, or raises InvalidSetting with what is allowed."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

# Linux's limits (limits.h) on a path and on one of its names, in bytes: longer ones fail
# with "File name too long" when a store opens.
PATH_MAX = 4096
NAME_MAX = 255


class InvalidSetting(ValueError):
    """A setting's value is not allowed; the message says which and what is."""


def index_folders(value: Any) -> tuple[str, ...]:
    """The setting's parser: a list of folder paths (settings.py's table)."""
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise InvalidSetting('use a list of index folders, e.g. ["/mnt/org-index"]')
    return tuple(dict.fromkeys(value))


@dataclass(frozen=True)
class _Choice:
    """The parser of a setting that takes one of ``options``."""

    options: tuple[str, ...]

    def __call__(self, value: Any) -> str:
        if value not in self.options:
            raise InvalidSetting(f"use one of {', '.join(self.options)}")
        return str(value)


@dataclass(frozen=True)
class _Int:
    """The parser of a whole number in [low, high]."""

    low: int
    high: int

    def __call__(self, value: Any) -> int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok or not self.low <= value <= self.high:
            raise InvalidSetting(f"use a whole number from {self.low} to {self.high}")
        return value


@dataclass(frozen=True)
class _Float:
    """The parser of a number in [low, high] (or (low, high] with ``open_low``)."""

    low: float
    high: float
    open_low: bool = False

    def __call__(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidSetting("use a number")
        ok = (self.low < value if self.open_low else self.low <= value) and value <= self.high
        if not ok:
            bracket = "(" if self.open_low else "["
            raise InvalidSetting(f"use a number in {bracket}{self.low}, {self.high}]")
        return float(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidSetting("use true or false")
    return value


def _optional_path(value: Any) -> str | None:
    """A store file's path, or None (the default). Checked here, when the setting arrives:
    a path the file system cannot open (a NUL byte, a name longer than NAME_MAX, the whole
    longer than PATH_MAX) failed every request that opens the store."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidSetting("use a file path or null")
    if "\0" in value:
        raise InvalidSetting("a path cannot hold a NUL character")
    if len(os.fsencode(value)) > PATH_MAX:
        raise InvalidSetting(f"use a path of at most {PATH_MAX} bytes")
    if any(len(os.fsencode(part)) > NAME_MAX for part in PurePath(value).parts):
        raise InvalidSetting(f"use a path whose file and folder names are at most {NAME_MAX} bytes")
    return value


def _non_finite(value: Any) -> bool:
    """Whether ``value`` is or holds (in a list or an object) an infinite or NaN number."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_non_finite(v) for v in value)
    return False


def _model_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidSetting(
            "use a model name, a GGUF file's path, ollama:NAME or a local model directory"
        )
    return value.strip()


def _orders(value: Any) -> tuple[int, ...]:
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(n, int) and not isinstance(n, bool) and 2 <= n <= 8 for n in value)
    ):
        raise InvalidSetting("use a non-empty list of n-gram orders from 2 to 8, e.g. [2, 3, 4]")
    return tuple(sorted(set(value)))


def _lambdas(value: Any) -> dict[int, float]:
    """An object {"2": 0.01, ...} keyed by order."""
    if not isinstance(value, Mapping) or not value:
        raise InvalidSetting('use an object of weights keyed by order, e.g. {"2": 0.1, "3": 0.3}')
    out: dict[int, float] = {}
    for key, weight in value.items():
        try:
            order = int(key)
        except (TypeError, ValueError) as err:
            raise InvalidSetting(f"order {key!r} is not a whole number") from err
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise InvalidSetting(f"weight of order {order} must be a number >= 0")
        out[order] = float(weight)
    return out


@dataclass(frozen=True)
class _PromptTokens:
    """The parser of a prompt size in tokens: at least 16, or 0, which means ``zero``."""

    zero: str

    def __call__(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not (value == 0 or value >= 16):
            raise InvalidSetting(f"use 0 ({self.zero}) or a whole number >= 16")
        return value
