//! flexkern-gguf
