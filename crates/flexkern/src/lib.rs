//! flexkern
