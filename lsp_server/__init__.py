"""Superposed decoding completion backend: protocol glue, completion logic, decoding engine."""
