//! GPU-only cases of the verify matrix whose Hopper prefill launches run several waves of
//! blocks (the CPU's matrix is sized for the CPU and fits in one): many ragged sequences, score
//! hooks with a captured tensor in whole and edge tiles, a document mask, and paged KV; and
//! paged decode under 2-byte queries, short and long partitions. Checked against the f64 oracle
//! like the rest.

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
    (
        vec![hooks, docs, wide],
        [vec![paged, wide_paged], paged_decode()].concat(),
    )
}

/// Paged decode under 2-byte queries (one m-tile: the decode kernel). 528 sequences of 1030
/// keys fill the card unsplit, so their long partitions read their pages from a window
/// (`plan::page_window`), moving it along. Sequences of 300 keys and one of 1100 over pages of
/// 256 split at 320 keys, so 128-key stages cross pages mid-stage. Ragged ones over pages of 4,
/// and fp8 ones whose evicted fronts start their tables past page 0, split into short
/// partitions. Short partitions look their pages up a stage at a time;
/// `FLEXKERN_CUDA_PAGE_WINDOW=0` runs them through the window too. The planner's tests hold
/// these plans at 2 to 5 blocks an SM.
fn paged_decode() -> Vec<PagedCase> {
    let case = |name: &str, seqs: Vec<(usize, usize)>, dk: usize, variant: Variant| Case {
        name: name.into(),
        dtype: DType::BF16,
        seqs,
        hq: 8,
        hkv: 2,
        dk,
        dv: dk,
        variant,
    };
    let paged = |case: Case, page_size: usize, kv_dtype: DType, window: Option<usize>| PagedCase {
        case,
        page_size,
        kv_dtype,
        window,
    };
    let ragged = vec![(1, 3000), (2, 1777), (4, 900), (1, 5), (0, 40), (3, 2500)];
    let mut crossing = vec![(1, 300); 527];
    crossing.push((1, 1100));
    vec![
        paged(
            case(
                "decode: 527 x 1 of 300 and 1 of 1100, GQA 4, D 64, stages across pages",
                crossing,
                64,
                Variant::full().mask(causal()),
            ),
            256,
            DType::BF16,
            None,
        ),
        paged(
            case(
                "decode: 528 x 1 of 1030, GQA 4, D 64, causal",
                vec![(1, 1030); 528],
                64,
                Variant::full().mask(causal()),
            ),
            16,
            DType::BF16,
            None,
        ),
        paged(
            case(
                "decode: 6 ragged of 5-3000, GQA 4, causal",
                ragged.clone(),
                128,
                Variant::full().mask(causal()),
            ),
            4,
            DType::BF16,
            None,
        ),
        paged(
            case(
                "decode: 6 ragged of 5-3000, sliding 256 + causal, evicted pages",
                ragged,
                128,
                Variant::full().mask(causal()).mask(sliding_window(256)),
            ),
            16,
            DType::Fp8E4M3,
            Some(256),
        ),
    ]
}
