"""The verify stage: build the pinned tree and run its gates (CPU first, then CUDA)."""
