"""Models that work anywhere: random-weight GGUFs written with `gguf`, quantized by the build's own tools."""
