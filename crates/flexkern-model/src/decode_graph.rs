//! The decode step as a recorded graph (CUDA graphs, through `TensorOps::record_begin`): a
//! step of one sequence and one token runs a few hundred small kernels, and on the GPU the
//! host's work per launch, not the kernels, set its pace. The first such step of a cache runs
//! eagerly on buffers kept at fixed addresses and is then recorded; later steps upload their
//! token, position, slot and page table into the same buffer and replay the graph, its
//! attention re-planned for the new length. Backends that do not record run every step eagerly.

use crate::buffers::DecodeGraph;
use crate::error::Result;
use crate::forward::{Logits, Model, Readback, SeqTokens, StepInputs, StepOut};
use crate::kv::KvCache;
use flexkern::attention::paged::paged_bufs;
use flexkern::backend::tensor_ops::TensorOps;
use flexkern::backend::{AttnIo, Buffer};
use flexkern::kv_cache::{PageTables, SeqId};
use flexkern::DType;

impl<'a, B: TensorOps + 'a> Model<'a, B> {
    /// Runs a decode step through the recorded graph where one serves it: `Ok(None)` when the
    /// step is not a single token of a single sequence on an unscaled cache, or the backend
    /// does not record (run it eagerly). On error the caller aborts the step as usual.
    /// `rb` says what comes back.
    pub(crate) fn decode_graph_step(
        &self,
        cache: &mut KvCache<B>,
        batch: &[SeqTokens<'_>],
        olds: &[(SeqId, usize)],
        slots: &[u32],
        tables: &PageTables,
        rb: Readback,
    ) -> Result<Option<StepOut>> {
        // One row: its logits are the last row's whichever `Logits` the caller asked for.
        let which = Logits::Last;
        let single = batch.len() == 1 && slots.len() == 1;
        if !single || cache.scaled() || cache.needs_scales() {
            return Ok(None);
        }
        let b = self.backend();
        let mut guard = self.graph.lock().expect("graph lock");
        if guard.as_ref().map(|g| g.cache) != Some(cache.id()) {
            if let Some(id) = guard.take().and_then(|g| g.id) {
                b.graph_free(id);
            }
            let c = &self.config;
            // tokens, positions, slots (one each), then cu_pages (2), first_page (1) and the
            // page indices of the longest sequence.
            let words = 3 + 3 + KvCache::<B>::pages_for(cache.max_len());
            *guard = Some(DecodeGraph {
                cache: cache.id(),
                words: b.alloc(DType::U32, words)?,
                s: self.scratch(cache, 1)?,
                logits: b.alloc(DType::F32, c.vocab)?,
                id: None,
                eager: false,
            });
        }
        let g = guard.as_mut().expect("set above");
        if g.eager {
            return Ok(None);
        }
        let (words, st) = Self::step_words(batch, olds, slots, tables);
        if words.len() > g.words.len() {
            return Ok(None);
        }
        b.upload(&mut g.words, 0, bytemuck::cast_slice(&words))?;
        let (p, pl) = self.attn_problem(cache, batch, tables)?;
        if let Some(id) = g.id {
            let store = cache.store(0);
            let q = match &g.s.qh {
                Some(h) if h.dtype() == p.q.dtype => h,
                _ => &g.s.q,
            };
            let io = AttnIo {
                q,
                kv: paged_bufs(tables, &store.k, &store.v, &g.words, st.tables),
                out: &mut g.s.att,
                lse: None,
            };
            match b.replay(id, (&p, &pl, io)) {
                Ok(true) => return self.read_out(&g.logits, 1, rb).map(Some),
                Ok(false) => {}
                Err(e) => {
                    // A graph that failed part-way is not trusted again.
                    b.graph_free(id);
                    (g.id, g.eager) = (None, true);
                    return Err(e.into());
                }
            }
            b.graph_free(id);
            g.id = None;
        }
        // Eagerly on the fixed buffers, then the same step recorded for the next ones (the
        // recording runs nothing: this step's K/V is written once).
        let queue = |cache: &mut KvCache<B>, g: &mut DecodeGraph<B::Buffer>| {
            let inputs = StepInputs {
                words: &g.words,
                st: &st,
                tables,
                problem: &p,
                plan: &pl,
            };
            self.queue_step(cache, &inputs, which, &mut g.s, &mut g.logits)
        };
        queue(cache, g)?;
        let out = self.read_out(&g.logits, 1, rb)?;
        if b.record_begin()? {
            let queued = queue(cache, g);
            // A step that cannot be recorded runs eagerly from now on; say why, once.
            let why = match (queued, b.record_end()) {
                (Ok(()), Ok(id)) => {
                    g.id = Some(id);
                    None
                }
                (Err(e), Ok(id)) => {
                    b.graph_free(id);
                    Some(e.to_string())
                }
                (_, Err(e)) => Some(e.to_string()),
            };
            if let Some(why) = why {
                g.eager = true;
                eprintln!("flexkern: the decode step was not recorded as a graph ({why}); it runs eagerly");
            }
        }
        Ok(Some(out))
    }
}
