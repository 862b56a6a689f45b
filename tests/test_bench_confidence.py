"""Issue 57: the confidence's fit and its precision-coverage curve (bench/confidence.py)."""

from __future__ import annotations

import json

import numpy as np

from bench.confidence import FIT, THRESHOLDS, choose, curve, fit, right
from lsp_server.completion.confidence import COEFFICIENTS, FEATURES
from lsp_server.settings import DecodingSettings


def test_the_fit_finds_the_weights_that_made_synthetic_labels() -> None:
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(20_000), rng.normal(size=(20_000, 2))])
    truth = np.array([-1.0, 2.0, -0.5])
    y = (rng.random(20_000) < 1 / (1 + np.exp(-(x @ truth)))).astype(float)
    w = fit(x, y, ridge=0.0)
    assert np.allclose(w, truth, atol=0.1)


def test_right_is_exact_or_a_prefix_of_a_third_of_the_rest() -> None:
    rest = "return self.value + 1"
    assert right({"drafts": [rest], "rest": rest})
    assert right({"drafts": ["return self", "x"], "rest": rest})  # 11 of 21 characters
    assert not right({"drafts": ["ret"], "rest": rest})  # a prefix, but too short
    assert not right({"drafts": ["return other"], "rest": rest})
    assert not right({"drafts": [], "rest": rest})


def test_the_curve_trades_coverage_for_precision() -> None:
    rows = [
        {"drafts": ["a = 1"], "rest": "a = 1"},
        {"drafts": ["b = 2"], "rest": "a = 1"},
        {"drafts": [""], "rest": "a = 1"},
    ]
    points = curve(rows, [0.9, 0.2, 0.9], [0.0, 0.5])
    assert points[0]["coverage"] == 2 / 3 and points[0]["precision"] == 0.5
    assert points[1]["coverage"] == 1 / 3 and points[1]["precision"] == 1.0
    assert points[1]["kept"] == 1.0


def test_the_default_is_the_lowest_threshold_that_meets_the_rule_at_each_cursor() -> None:
    flat = [{"precision": 0.2, "kept": 1.0}] * len(THRESHOLDS)
    better = list(flat)
    better[3] = {"precision": 0.31, "kept": 0.85}
    better[4] = {"precision": 0.4, "kept": 0.7}  # too few right drafts kept
    assert choose({"line-start": better, "mid-line": better})["threshold"] == THRESHOLDS[3]
    short = list(flat)
    short[3] = {"precision": 0.26, "kept": 0.9}  # 1.3x: short of 1.5x
    missed = choose({"line-start": better, "mid-line": short})
    assert missed["threshold"] is None
    assert missed["closest"]["threshold"] == THRESHOLDS[3]  # 1.55x and 1.3x: the nearest
    assert round(missed["closest"]["gain"]["mid-line"], 6) == 1.3


def test_the_server_weighs_with_the_committed_fit() -> None:
    fitted = json.loads(FIT.read_text())["coefficients"]
    assert list(fitted) == list(FEATURES)
    assert fitted == COEFFICIENTS


def test_the_default_threshold_is_the_fits_choice_or_the_nearest_to_it() -> None:
    chosen = json.loads(FIT.read_text())["default"]
    settings = DecodingSettings()
    if chosen["threshold"] is None:  # issue 57's rule unmet: drafts are shown always
        assert settings.show_when == "always"
        assert settings.show_threshold == chosen["closest"]["threshold"]
    else:
        assert settings.show_when == "confident"
        assert settings.show_threshold == chosen["threshold"]
