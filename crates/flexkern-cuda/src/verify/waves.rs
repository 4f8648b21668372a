//! GPU-only cases of the verify matrix whose Hopper prefill launches run several waves of
//! blocks (the CPU's matrix is sized for the CPU and fits in one): many ragged sequences, score
//! hooks with a captured tensor in whole and edge tiles, a document mask, and paged KV. Checked
//! against the f64 oracle like the rest.

use flexkern::builtins::{alibi, alibi_slopes, causal, document, sliding_window, softcap};
use flexkern::verify::{Case, PagedCase};
use flexkern::{DType, Variant};

pub fn wave_cases() -> (Vec<Case>, Vec<PagedCase>) {
    let hooks = Case {
        name: "waves: 96 x 130 queries, causal + softcap 30 + alibi".into(),
        dtype: DType::BF16,
        seqs: (0..96).map(|i| (130, 130 + 10 * (i % 7))).collect(),
        hq: 4,
        hkv: 4,
        dk: 64,
        dv: 64,
        variant: Variant::full()
            .mask(causal())
            .score(softcap(30.0))
            .score(alibi(alibi_slopes(4))),
    };
    let ids = (0..260).map(|i| i / 90).collect();
    let docs = Case {
        name: "waves: 20 x 200 of 260, document + causal, GQA 2".into(),
        dtype: DType::F16,
        seqs: vec![(200, 260); 20],
        hq: 4,
        hkv: 2,
        dk: 128,
        dv: 128,
        variant: Variant::full().mask(document(ids)).mask(causal()),
    };
    let paged = PagedCase {
        case: Case {
            name: "waves: 40 x 160 of 200, sliding 64 + causal, GQA 4".into(),
            dtype: DType::BF16,
            seqs: vec![(160, 200); 40],
            hq: 4,
            hkv: 1,
            dk: 128,
            dv: 128,
            variant: Variant::full().mask(causal()).mask(sliding_window(64)),
        },
        page_size: 16,
        kv_dtype: DType::BF16,
        window: None,
    };
    // Three consumer warpgroups (D 64, more than 128 rows): ragged (an empty sequence, a row
    // tile cut short), and paged with GQA packing rows of several queries.
    let wide = Case {
        name: "waves: 24 ragged of up to 700 queries, D 64, causal".into(),
        dtype: DType::BF16,
        seqs: (0..24)
            .map(|i| (i * 37 % 700, 700 + 13 * (i % 5)))
            .collect(),
        hq: 2,
        hkv: 2,
        dk: 64,
        dv: 64,
        variant: Variant::full().mask(causal()),
    };
    let wide_paged = PagedCase {
        case: Case {
            name: "waves: 12 x 250 of 400, D 64, GQA 4, non-causal".into(),
            dtype: DType::F16,
            seqs: vec![(250, 400); 12],
            hq: 8,
            hkv: 2,
            dk: 64,
            dv: 64,
            variant: Variant::full(),
        },
        page_size: 32,
        kv_dtype: DType::F16,
        window: None,
    };
    (vec![hooks, docs, wide], vec![paged, wide_paged])
}
