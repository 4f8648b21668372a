//! The device buffers a forward call works in: the activation rows of one call, and the fixed
//! buffers a recorded decode step reads and writes (`decode_graph.rs`).

use flexkern::backend::tensor_ops::GraphId;

/// Activation buffers of one forward call (`m` rows each).
pub(crate) struct Scratch<Buf> {
    pub(crate) x: Buf,
    pub(crate) h: Buf,
    pub(crate) q: Buf,
    pub(crate) k: Buf,
    pub(crate) v: Buf,
    pub(crate) att: Buf,
    pub(crate) proj: Buf,
    pub(crate) ff: Buf,
    /// Q rounded for the attention (`attn_q_dtype`), when it is not f32.
    pub(crate) qh: Option<Buf>,
}

/// The buffers a recorded step reads and writes, for one cache.
pub(crate) struct DecodeGraph<Buf> {
    pub(crate) cache: u64,
    /// The step upload, sized for the cache's longest sequence.
    pub(crate) words: Buf,
    pub(crate) s: Scratch<Buf>,
    pub(crate) logits: Buf,
    pub(crate) id: Option<GraphId>,
    /// Recording failed for this cache: its steps run eagerly.
    pub(crate) eager: bool,
}
