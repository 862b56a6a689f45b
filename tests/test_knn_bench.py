"""bench/knn_cost.py: the committed markdown is the committed results, rendered."""

from __future__ import annotations

import json

from bench import knn_cost
from bench.measure import RESULTS


def test_the_committed_knn_cost_markdown_renders_from_its_results() -> None:
    result = json.loads(knn_cost.OUT.read_text())
    replay = json.loads(knn_cost.REPLAY.read_text()) if knn_cost.REPLAY.exists() else None
    assert knn_cost.render(result, replay) == (RESULTS / "knn_cost.md").read_text()

