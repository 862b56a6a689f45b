"""bench/cpu_anchor.py: its report of the side-by-side kernel timings."""

from __future__ import annotations

from bench import cpu_anchor


def test_the_report_tables_every_kernel_set_and_the_bounds() -> None:
    data = {
        "stamp": {"date": "2026-12-03 09:00 UTC", "commit": "abc", "machine": "x86_64, 2 CPUs"},
        "note": cpu_anchor.NOTE,
        "cpu_capability": "AVX2",
        "rounds": 3,
        "median_ms": {
            "int4 @1": {"step b1": 30.5, "prefill 256": 900.0},
            "int8 @1": {"step b1": 28.0, "prefill 256": 950.0},
        },
        "bounds": {"1": {"sgemm GFLOP/s": 50.0, "copy GB/s": 20.0}},
        "llama_cpp": cpu_anchor.llama_cpp_available() or "measured",
    }
    text = cpu_anchor.report(data)
    assert "| int4 @1 | 30.5 | 900.0 |" in text and "| int8 @1 | 28.0 | 950.0 |" in text
    assert "| 1 | 50.0 | 20.0 |" in text
    assert "shared 2-core machine" in text and "llama.cpp:" in text


def test_the_bounds_are_positive_rates() -> None:
    measured = cpu_anchor.bounds(copy_mb=8)
    assert set(measured) == {"sgemm GFLOP/s", "copy GB/s"}
    assert all(v > 0 for v in measured.values())
