"""Measurements of a pinned build against its base: KLD vs the CPU, interleaved llama-bench, and their statistics."""
