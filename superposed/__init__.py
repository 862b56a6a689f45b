"""Decoding engine: pure tensor code. Imports neither SQLite nor pygls.

Modules:
    types       configuration, the request, drafts, stop conditions, errors shared by every method
    ngram       the n-gram source interface and a small in-memory source
    vocab       token bytes, EOS ids and the prefix index used by token healing
    prompt      text before the cursor -> prompt token ids (+ healed text)
    runner      the model-runner interface and the generic transformers runner
    model       loading the embedded default model or any Hugging Face causal LM
    superposed  Superposed Decoding (Shen et al., 2024)
    baselines   greedy, nucleus (sequential and batched), beam, nucleus x superposed
"""
