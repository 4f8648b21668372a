//! flexkern-model
