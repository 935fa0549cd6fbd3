"""LongMem: a synthetic long-conversation memory benchmark (generator, validator, BM25 baseline)."""
