//! A block timeline of one attention call (`FLEXKERN_CUDA_TRACE=1`): the tensor-core kernel and
//! the merge record each block's start, duration and SM (`fk_trace` in fk_common.cuh), and
//! `Timeline::summary` says how the blocks filled the card. No profiler reads inside a CUDA
//! graph on the lent machines (no nsys; ncu serializes kernels), so this is how a wave's ramp,
//! its tail and the merge's gap are seen.

use std::collections::BTreeMap;

/// Slots of `fk_trace` (FK_TRACE_SLOTS): the attention blocks take the first three quarters,
/// the merge's the last.
pub const SLOTS: usize = 8192;
const MERGE_AT: usize = SLOTS / 4 * 3;

/// Whether `FLEXKERN_CUDA_TRACE=1` (read once): kernels are built with FK_TRACE.
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("FLEXKERN_CUDA_TRACE").is_ok_and(|v| v == "1"))
}

/// One block: start (ns of the GPU's global timer), duration (ns) and SM.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Record {
    pub start: u64,
    pub dur: u64,
    pub sm: u32,
}

impl Record {
    fn end(&self) -> u64 {
        self.start + self.dur
    }
}

/// Phase marks a block records (`fk_trace_ph`, FK_TRACE_MARKS a block): Q ready, first tile
/// landed and loop done (ns after the block's start), then where its first consumer warp's loop
/// spent SM cycles: waiting for tiles, for its turn (the Hopper prefill) or queueing copies
/// (the mma.sync kernel), in its MMAs and in the softmax (the mma.sync kernel: Q K^T, then the
/// scores and softmax; P V's issue goes to MMA, its completion to the next softmax).
pub const MARKS: usize = 7;
const TIMES: usize = 3;
const MARK_NAMES: [&str; MARKS] = [
    "Q ready",
    "first tile",
    "loop done",
    "tiles",
    "turn or copies",
    "MMA",
    "softmax",
];

/// The attention kernel's blocks and the merge's (empty when the kernel joined itself).
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub attn: Vec<Record>,
    pub merge: Vec<Record>,
    /// Per attention block, where its kernel records them (else empty).
    pub marks: Vec<[u32; MARKS]>,
}

/// Decodes `fk_trace` (pairs of words) for `attn` and `merge` blocks; slots past the array's
/// parts are left out.
pub fn parse(raw: &[u64], attn: usize, merge: usize) -> Timeline {
    let rec = |slot: usize| {
        let (s, w) = (raw[2 * slot], raw[2 * slot + 1]);
        Record {
            start: s,
            dur: w >> 16,
            sm: (w & 0xffff) as u32,
        }
    };
    let slots = raw.len() / 2;
    Timeline {
        attn: (0..attn.min(MERGE_AT).min(slots)).map(rec).collect(),
        merge: (MERGE_AT..(MERGE_AT + merge).min(slots)).map(rec).collect(),
        marks: Vec::new(),
    }
}

impl Timeline {
    /// Adds the attention blocks' phase marks from `fk_trace_ph`; a block that recorded none
    /// (all zero: it did not reach them) is left out of the phases.
    pub fn with_marks(mut self, raw: &[u32]) -> Timeline {
        self.marks = (0..self.attn.len())
            .filter_map(|b| raw.get(MARKS * b..MARKS * (b + 1)))
            .map(|m| std::array::from_fn(|i| m[i]))
            .filter(|m| m.iter().any(|&x| x != 0))
            .collect();
        self
    }

    /// Idle time on an SM between one block's end and its next block's start (ns), over every
    /// SM: what a block switch costs.
    pub fn switch_gaps(&self) -> Vec<u64> {
        let mut per_sm: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
        for r in &self.attn {
            per_sm.entry(r.sm).or_default().push((r.start, r.end()));
        }
        let mut gaps = Vec::new();
        for iv in per_sm.values_mut() {
            iv.sort_unstable();
            gaps.extend(iv.windows(2).map(|w| w[1].0.saturating_sub(w[0].1)));
        }
        gaps.sort_unstable();
        gaps
    }
}

/// The q-th quantile (0..=1) of sorted `v`, nearest rank.
fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

impl Timeline {
    /// How busy the SMs were from the first block's start to the last block's end: per SM, the
    /// union of its blocks' intervals over that span, averaged over `sms` (SMs that ran nothing
    /// count as idle).
    pub fn sm_busy(&self, sms: usize) -> f64 {
        let (Some(t0), Some(t1)) = (
            self.attn.iter().map(|r| r.start).min(),
            self.attn.iter().map(Record::end).max(),
        ) else {
            return 0.0;
        };
        let mut per_sm: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
        for r in &self.attn {
            per_sm.entry(r.sm).or_default().push((r.start, r.end()));
        }
        let mut busy = 0u64;
        for iv in per_sm.values_mut() {
            iv.sort_unstable();
            let (mut a, mut b) = iv[0];
            for &(s, e) in &iv[1..] {
                if s > b {
                    busy += b - a;
                    (a, b) = (s, e);
                } else {
                    b = b.max(e);
                }
            }
            busy += b - a;
        }
        busy as f64 / (sms.max(per_sm.len()) as f64 * (t1 - t0).max(1) as f64)
    }

    /// One paragraph: the span, when blocks started and ended (microseconds from the first
    /// start), their durations, how busy the SMs were, and the merge's gap and span.
    pub fn summary(&self, sms: usize) -> String {
        let Some(t0) = self.attn.iter().map(|r| r.start).min() else {
            return "trace: no attention blocks recorded".into();
        };
        let us = |ns: u64| ns as f64 / 1e3;
        let mut starts: Vec<u64> = self.attn.iter().map(|r| r.start - t0).collect();
        let mut ends: Vec<u64> = self.attn.iter().map(|r| r.end() - t0).collect();
        let mut durs: Vec<u64> = self.attn.iter().map(|r| r.dur).collect();
        starts.sort_unstable();
        ends.sort_unstable();
        durs.sort_unstable();
        let q = |v: &[u64]| {
            format!(
                "p10 {:.1} p50 {:.1} p90 {:.1} max {:.1}",
                us(quantile(v, 0.1)),
                us(quantile(v, 0.5)),
                us(quantile(v, 0.9)),
                us(quantile(v, 1.0))
            )
        };
        let last = *ends.last().unwrap_or(&0);
        let mut s = format!(
            "trace: {} blocks on {} SMs, SMs busy {:.1} % of {:.1} us | starts {} | ends {} | durations {}",
            self.attn.len(),
            self.attn.iter().map(|r| r.sm).collect::<std::collections::BTreeSet<_>>().len(),
            100.0 * self.sm_busy(sms),
            us(last),
            q(&starts),
            q(&ends),
            q(&durs),
        );
        let gaps = self.switch_gaps();
        if !gaps.is_empty() {
            s += &format!(" | switch gaps {}", q(&gaps));
        }
        if !self.marks.is_empty() {
            let pct = |i: usize, q: f64| {
                let mut v: Vec<u64> = self.marks.iter().map(|m| u64::from(m[i])).collect();
                v.sort_unstable();
                quantile(&v, q)
            };
            let phases: Vec<String> = (0..TIMES)
                .map(|i| {
                    let (a, b) = (pct(i, 0.5), pct(i, 0.9));
                    format!("{} p50 {:.1} p90 {:.1}", MARK_NAMES[i], us(a), us(b))
                })
                .collect();
            s += &format!(" | phases (us after start): {}", phases.join(", "));
            let cycles: Vec<String> = (TIMES..MARKS)
                .map(|i| format!("{} {:.1}", MARK_NAMES[i], pct(i, 0.5) as f64 / 1e3))
                .collect();
            s += &format!(" | consumer loop p50 (kcycles): {}", cycles.join(", "));
        }
        if let (Some(m0), Some(m1)) = (
            self.merge.iter().map(|r| r.start).min(),
            self.merge.iter().map(Record::end).max(),
        ) {
            s += &format!(
                " | merge: {} blocks, starts {:.1} us after the last attention block, ends at {:.1}",
                self.merge.len(),
                (m0 as f64 - (t0 + last) as f64) / 1e3,
                us(m1 - t0)
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(recs: &[(usize, u64, u64, u32)]) -> Vec<u64> {
        let mut v = vec![0u64; 2 * SLOTS];
        for &(slot, s, d, sm) in recs {
            v[2 * slot] = s;
            v[2 * slot + 1] = d << 16 | u64::from(sm);
        }
        v
    }

    #[test]
    fn busy_is_the_union_of_each_sms_blocks_over_the_span() {
        // SM 0: [0, 100) and [50, 150) overlap -> 150; SM 1: [0, 50) and [100, 200) -> 150.
        let t = parse(
            &raw(&[
                (0, 1000, 100, 0),
                (1, 1050, 100, 0),
                (2, 1000, 50, 1),
                (3, 1100, 100, 1),
                (MERGE_AT, 1300, 10, 5),
            ]),
            4,
            1,
        );
        assert_eq!(t.attn.len(), 4);
        assert_eq!(
            t.merge,
            vec![Record {
                start: 1300,
                dur: 10,
                sm: 5
            }]
        );
        assert!((t.sm_busy(2) - 300.0 / 400.0).abs() < 1e-12);
        // Two more SMs that ran nothing halve it.
        assert!((t.sm_busy(4) - 300.0 / 800.0).abs() < 1e-12);
        let s = t.summary(2);
        assert!(s.contains("4 blocks on 2 SMs"), "{s}");
        assert!(s.contains("SMs busy 75.0 %"), "{s}");
        assert!(s.contains("merge: 1 blocks, starts 0.1 us after"), "{s}");
        // SM 1 idles 50 ns between its blocks; SM 0's overlap counts as no gap.
        assert_eq!(t.switch_gaps(), vec![0, 50]);
    }

    #[test]
    fn phase_marks_skip_blocks_that_recorded_none() {
        let t = parse(&raw(&[(0, 1000, 900, 0), (1, 1000, 900, 1)]), 2, 0).with_marks(&[
            100, 300, 800, 1000, 2000, 3000, 4000, 0, 0, 0, 0, 0, 0, 0, 7,
        ]);
        assert_eq!(t.marks, vec![[100, 300, 800, 1000, 2000, 3000, 4000]]);
        let s = t.summary(2);
        assert!(s.contains("Q ready p50 0.1"), "{s}");
        assert!(s.contains("loop done p50 0.8"), "{s}");
        assert!(s.contains("MMA 3.0, softmax 4.0"), "{s}");
    }

    #[test]
    fn short_or_odd_buffers_decode_only_the_slots_they_hold() {
        let t = parse(&[5, 7 << 16 | 3, 9], 100, 100);
        assert_eq!(
            t.attn,
            vec![Record {
                start: 5,
                dur: 7,
                sm: 3
            }]
        );
        assert!(t.merge.is_empty());
        assert!(parse(&[], 10, 10).attn.is_empty());
    }

    #[test]
    fn an_empty_timeline_says_so() {
        assert!(parse(&raw(&[]), 0, 0)
            .summary(132)
            .contains("no attention blocks"));
        assert_eq!(parse(&raw(&[]), 0, 0).sm_busy(132), 0.0);
    }
}
