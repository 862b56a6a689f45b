"""Benchmarks: latency, n-gram store, quality (next line, HumanEval infilling, coherence)."""
