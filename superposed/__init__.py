"""Decoding engine: pure tensor code. Imports neither SQLite nor pygls (tests/test_layers.py).

Its modules, one line each, are in docs/architecture.md (one list, kept there, not here too).
"""
