//! Plan reuse across the layers of one step.

use super::*;

/// The last call's plan, kept for the next call that differs only in its buffers (the model's
/// layers within one step: same lengths, layout, variant and page tables, each layer its own
/// K/V): that call skips planning, code lookup and the step upload, as FlashInfer's plan-once,
/// run-per-layer does. Reuse is safe on the one stream: the step is read-only but for the
/// arrival counters, which the kernel resets.
#[derive(Default)]
pub struct PlanMemo {
    pub(super) last: std::sync::Mutex<Option<(Vec<u8>, Prepared)>>,
    /// Calls that reused the last plan.
    pub hits: std::sync::atomic::AtomicUsize,
}

/// `attention` through `memo`.
/// `FLEXKERN_CUDA_PLAN_MEMO=0` plans every call afresh (A/B runs).
pub fn attention_memo(dev: &Arc<Device>, c: &AttnCall, memo: &PlanMemo) -> Result<()> {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *OFF.get_or_init(|| std::env::var("FLEXKERN_CUDA_PLAN_MEMO").is_ok_and(|v| v == "0")) {
        return attention(dev, c);
    }
    memo.with(dev, c, |p| p.launch()).map(|_| ())
}

impl PlanMemo {
    /// Runs `f` on the plan of `c`: the last one when only buffers differ (re-pointed at
    /// `c`'s), else a new one that replaces it. `Ok(None)`: nothing to compute.
    pub(super) fn with<R>(
        &self,
        dev: &Arc<Device>,
        c: &AttnCall,
        f: impl FnOnce(&Prepared) -> Result<R>,
    ) -> Result<Option<R>> {
        validate(c)?;
        // The hooks' source is written only when a module is compiled (a plan needs the key
        // and parameters alone).
        let lowering = codegen::lower(c.variant);
        let key = plan_key(c, &lowering.key, &lowering.params);
        // The plan is taken out while in use, so the lock is never held across planning
        // (other threads' compiles must not queue behind it); a thread finding it out plans
        // its own.
        let last = self.last.lock().expect("plan memo lock").take();
        // A plan whose TMA maps cannot address the new buffers is planned again.
        let last = match last {
            Some((k, mut p)) if k == key => {
                if p.rebind(c) {
                    self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Ok(p)
                } else {
                    Err(Some((k, p)))
                }
            }
            old => Err(old),
        };
        let p = match last {
            Ok(p) => p,
            Err(old) => match prepare_with(dev, c, lowering, old.map(|(_, p)| p._bufs))? {
                Some(p) => p,
                None => return Ok(None),
            },
        };
        let r = f(&p);
        *self.last.lock().expect("plan memo lock") = Some((key, p));
        r.map(Some)
    }
}

/// Records what is hashed into it, so that keys compare exactly: a 64-bit digest could let two
/// different calls share a plan.
#[derive(Default)]
struct KeyBytes(Vec<u8>);

impl std::hash::Hasher for KeyBytes {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
    fn finish(&self) -> u64 {
        0 // never read: keys are compared as bytes
    }
}

/// Everything a plan and its step buffer depend on: all of the call but its buffers' addresses
/// (unambiguous: slices and strings carry their lengths).
fn plan_key<B>(c: &AttnCall<'_, B>, hooks_key: &str, params: &codegen::ParamLayout) -> Vec<u8> {
    use std::hash::Hash;
    let mut h = KeyBytes(Vec::with_capacity(64 + 24 * c.lens.num_seqs()));
    let lens = c.lens;
    for s in 0..lens.num_seqs() {
        (lens.q_start(s), lens.q_len(s), lens.kv_len(s)).hash(&mut h);
    }
    (c.num_q_heads, c.num_kv_heads, c.head_dim, c.head_dim_v).hash(&mut h);
    c.scale.to_bits().hash(&mut h);
    hooks_key.hash(&mut h);
    params.ints.hash(&mut h);
    params.floats.iter().for_each(|f| f.to_bits().hash(&mut h));
    for cd in &params.captures {
        match cd {
            codegen::CaptureData::Int(v) => v.hash(&mut h),
            codegen::CaptureData::Float(v) => v.iter().for_each(|f| f.to_bits().hash(&mut h)),
        }
    }
    if let Some(sk) = &c.variant.sinks {
        sk.iter().for_each(|f| f.to_bits().hash(&mut h));
    }
    (c.q.dtype, c.q.seq_base, c.q.tok_stride, c.q.head_stride).hash(&mut h);
    match &c.kv {
        KvInput::Strided { k, v } => {
            for o in [k, v] {
                (o.dtype, o.seq_base, o.tok_stride, o.head_stride).hash(&mut h);
            }
        }
        KvInput::Paged(p) => {
            (p.k_dtype, p.v_dtype, p.page_size, p.num_pages).hash(&mut h);
            (p.cu_pages, p.first_page, p.page_indices).hash(&mut h);
            p.device_tables.map(|t| t.page_indices_len).hash(&mut h);
        }
    }
    c.k_scales
        .iter()
        .chain(c.v_scales)
        .for_each(|f| f.to_bits().hash(&mut h));
    (c.lse.is_some(), c.deterministic).hash(&mut h);
    h.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexkern::builtins::{causal, sliding_window};
    use flexkern::Variant;

    /// A call's key, with stand-in buffers (addresses as numbers): the plan never reads them.
    fn key(c: &AttnCall<'_, u64>) -> Vec<u8> {
        let l = codegen::lower(c.variant);
        plan_key(c, &l.key, &l.params)
    }

    /// The layers of a step share a plan: calls that differ in their buffers alone have one
    /// key; any change a plan depends on (lengths, heads, scale, the variant's constants and
    /// sinks, layouts, page tables, KV scales, the LSE output, determinism) gives another.
    #[test]
    fn plan_keys_ignore_buffers_and_nothing_else() {
        let lens = SeqLens::new(&[0, 3, 4], &[40, 17]).unwrap();
        let lens2 = SeqLens::new(&[0, 3, 4], &[40, 18]).unwrap();
        let cv = |v: Variant| v.compile().unwrap();
        let (win, win2) = (
            cv(Variant::full().mask(causal()).mask(sliding_window(8))),
            cv(Variant::full().mask(causal()).mask(sliding_window(9))),
        );
        let sinks = cv(Variant::full()
            .mask(causal())
            .mask(sliding_window(8))
            .sinks(vec![0.5; 4]));
        let (b1, b2) = (0x1000u64, 0x2000u64);
        let (qb, kb) = ([0usize, 12], [0usize, 40]);
        let op = |buf, dtype, seq_base| Operand {
            buf,
            dtype,
            seq_base,
            tok_stride: 64,
            head_stride: 16,
        };
        let (cu, first, idx) = ([0u32, 3, 5], [0u32, 0], [4u32, 1, 2, 7, 0]);
        let idx2 = [4u32, 1, 2, 7, 3];
        let paged = |k, v, page_indices| {
            KvInput::Paged(PagedKv {
                k,
                v,
                k_dtype: DType::F16,
                v_dtype: DType::F16,
                page_size: 16,
                num_pages: 8,
                cu_pages: &cu,
                first_page: &first,
                page_indices,
                device_tables: None,
            })
        };
        let base = |buf| AttnCall {
            lens: &lens,
            num_q_heads: 4,
            num_kv_heads: 1,
            head_dim: 16,
            head_dim_v: 16,
            scale: 0.25,
            variant: &win,
            q: op(buf, DType::F16, &qb),
            kv: paged(buf, buf, &idx),
            k_scales: &[],
            v_scales: &[],
            out: buf,
            lse: None,
            deterministic: false,
        };
        let k0 = key(&base(&b1));
        assert_eq!(k0, key(&base(&b2)), "buffers alone");
        let changed: Vec<(&str, AttnCall<'_, u64>)> = vec![
            (
                "lengths",
                AttnCall {
                    lens: &lens2,
                    ..base(&b1)
                },
            ),
            (
                "kv heads",
                AttnCall {
                    num_kv_heads: 2,
                    ..base(&b1)
                },
            ),
            (
                "head size v",
                AttnCall {
                    head_dim_v: 32,
                    ..base(&b1)
                },
            ),
            (
                "scale",
                AttnCall {
                    scale: 0.5,
                    ..base(&b1)
                },
            ),
            (
                "window",
                AttnCall {
                    variant: &win2,
                    ..base(&b1)
                },
            ),
            (
                "sinks",
                AttnCall {
                    variant: &sinks,
                    ..base(&b1)
                },
            ),
            (
                "q dtype",
                AttnCall {
                    q: op(&b1, DType::BF16, &qb),
                    ..base(&b1)
                },
            ),
            (
                "q stride",
                AttnCall {
                    q: Operand {
                        tok_stride: 128,
                        ..op(&b1, DType::F16, &qb)
                    },
                    ..base(&b1)
                },
            ),
            (
                "page table",
                AttnCall {
                    kv: paged(&b1, &b1, &idx2),
                    ..base(&b1)
                },
            ),
            (
                "contiguous",
                AttnCall {
                    kv: KvInput::Strided {
                        k: op(&b1, DType::F16, &kb),
                        v: op(&b1, DType::F16, &kb),
                    },
                    ..base(&b1)
                },
            ),
            (
                "k scales",
                AttnCall {
                    k_scales: &[2.0],
                    ..base(&b1)
                },
            ),
            (
                "lse",
                AttnCall {
                    lse: Some(&b1),
                    ..base(&b1)
                },
            ),
            (
                "deterministic",
                AttnCall {
                    deterministic: true,
                    ..base(&b1)
                },
            ),
        ];
        for (what, c) in &changed {
            assert_ne!(key(c), k0, "{what} must change the key");
        }
    }
}
