"""Next edits (issue 35): the edit the user just made, proposed where it applies next.

log.py (the recent changes per document) -> patterns.py (an ended change's token-level
rewrite) -> sites.py (where its "before" still stands) -> proposals.py (ranked, fresh,
private) -> service.py (the protocol: superposed/nextEdits, superposed/nextEditsReady, the
accept and dismiss commands). No model: exact token matches only.
"""
