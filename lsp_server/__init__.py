"""Superposed decoding completion backend: protocol glue, completion logic and the decoding engine."""
