//! The GPU work list: which blocks run which (sequence, row tile, KV range), and how the
//! partitions of each row tile are merged. Plain index arrays built on the host from lengths
//! alone (no device access, no sync), uploaded with the rest of the step in one copy; and the
//! tensor-core kernels' shapes.

mod blockmask;
mod groups;
mod shape;
#[cfg(test)]
mod tests;
mod work;

pub use blockmask::*;
pub use groups::*;
pub use shape::*;
pub use work::*;
