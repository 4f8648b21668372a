//! Batched steps and continuous batching on a tiny random Q8_0 model: a ragged step equals
//! each sequence run alone, greedy tokens with several prompts active equal each prompt run
//! alone, sequences join and leave and reuse pages, and pool exhaustion and bad arguments are
//! typed errors that leave every sequence intact.

use flexkern::CpuBackend;
use flexkern_gguf::{GgmlType, GgufFile, GgufWriter, Value};
use flexkern_model::{
    generate, generate_batch, BatchConfig, Finish, Flow, Logits, Model, ModelError, Sampler,
    SamplerConfig, SeqTokens,
};
use flexkern_quant::{quantize, Format};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const D: usize = 64;
const FF: usize = 128;
const VOCAB: usize = 96;

/// A random 2-layer llama (4 heads, 2 KV heads) with Q8_0 matrices, as GGUF bytes.
fn tiny_q8_model() -> GgufFile {
    let mut rng = StdRng::seed_from_u64(11);
    let mut w = GgufWriter::new();
    let meta = [
        ("general.architecture", Value::String("llama".into())),
        ("llama.block_count", Value::U32(2)),
        ("llama.embedding_length", Value::U32(D as u32)),
        ("llama.feed_forward_length", Value::U32(FF as u32)),
        ("llama.attention.head_count", Value::U32(4)),
        ("llama.attention.head_count_kv", Value::U32(2)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.rope.freq_base", Value::F32(10_000.0)),
        ("llama.context_length", Value::U32(256)),
        ("llama.vocab_size", Value::U32(VOCAB as u32)),
    ];
    for (k, v) in meta {
        w.add_metadata(k.to_string(), v).unwrap();
    }
    let mut add = |name: String, n: usize, k: usize, scale: f32, offset: f32| {
        let vals: Vec<f32> = (0..n * k)
            .map(|_| offset + scale * (rng.gen::<f32>() * 2.0 - 1.0))
            .collect();
        if n == 1 {
            let bytes = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            w.add_tensor(name, &[k as u64], GgmlType::F32, bytes)
                .unwrap();
        } else {
            let bytes = quantize(Format::Q8_0, &vals, n, k).unwrap();
            let ty = GgmlType::from_id(Format::Q8_0.ggml_type().unwrap()).unwrap();
            w.add_tensor(name, &[k as u64, n as u64], ty, bytes)
                .unwrap();
        }
    };
    add("token_embd.weight".into(), VOCAB, D, 1.0, 0.0);
    add("output_norm.weight".into(), 1, D, 0.1, 1.0);
    for i in 0..2 {
        let n = |t: &str| format!("blk.{i}.{t}.weight");
        add(n("attn_norm"), 1, D, 0.1, 1.0);
        for t in ["attn_q", "attn_k", "attn_v"] {
            add(n(t), if t == "attn_q" { D } else { D / 2 }, D, 0.3, 0.0);
        }
        add(n("attn_output"), D, D, 0.3, 0.0);
        add(n("ffn_norm"), 1, D, 0.1, 1.0);
        add(n("ffn_gate"), FF, D, 0.3, 0.0);
        add(n("ffn_up"), FF, D, 0.3, 0.0);
        add(n("ffn_down"), D, FF, 0.2, 0.0);
    }
    GgufFile::from_bytes(w.to_bytes()).unwrap()
}

fn prompts(lens: &[usize]) -> Vec<Vec<u32>> {
    let mut rng = StdRng::seed_from_u64(3);
    lens.iter()
        .map(|&n| (0..n).map(|_| rng.gen_range(0..VOCAB as u32)).collect())
        .collect()
}

fn greedy() -> SamplerConfig {
    SamplerConfig {
        temperature: 0.0,
        ..SamplerConfig::default()
    }
}

/// max |a - b| / max |b|; NaN never passes.
fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    assert!(a.iter().chain(b).all(|x| x.is_finite()));
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
    let e = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    e / scale
}

/// One ragged step (prompt chunks and decode tokens of several sequences) gives each
/// sequence's logits as running that sequence alone.
#[test]
fn ragged_step_equals_each_sequence_alone() {
    let f = tiny_q8_model();
    let model = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    let ps = prompts(&[9, 1, 30, 17]);
    let mut cache = model
        .new_shared_cache(128, 64, flexkern::DType::F32)
        .unwrap();
    let seqs: Vec<_> = ps.iter().map(|_| cache.add_seq()).collect();
    // Step 1: prompt prefixes of three sequences (the fourth waits).
    let cut = [5, 1, 20];
    let step1: Vec<SeqTokens> = (0..3)
        .map(|i| SeqTokens {
            seq: seqs[i],
            tokens: &ps[i][..cut[i]],
        })
        .collect();
    let got1 = model
        .forward_batch(&mut cache, &step1, Logits::All)
        .unwrap();
    // Step 2: the rest of each prompt (the second one decodes a token) and all of the fourth.
    let extra = [7u32];
    let step2: Vec<SeqTokens> = (0..4)
        .map(|i| SeqTokens {
            seq: seqs[i],
            tokens: match i {
                1 => &extra,
                3 => &ps[3],
                _ => &ps[i][cut[i]..],
            },
        })
        .collect();
    let got2 = model
        .forward_batch(&mut cache, &step2, Logits::Last)
        .unwrap();
    let mut row1 = 0;
    for i in 0..4 {
        let mut alone = model.new_cache(128).unwrap();
        let mut full = ps[i].clone();
        if i == 1 {
            full.push(7);
        }
        let want = model.forward(&mut alone, &full, Logits::All).unwrap();
        if i < 3 {
            let n = cut[i] * VOCAB;
            let e = rel_err(&got1[row1..row1 + n], &want[..n]);
            assert!(e <= 1e-5, "sequence {i} step 1: {e:e}");
            row1 += n;
        }
        let last = &want[want.len() - VOCAB..];
        let e = rel_err(&got2[i * VOCAB..(i + 1) * VOCAB], last);
        assert!(e <= 1e-5, "sequence {i} step 2: {e:e}");
        assert_eq!(cache.seq_len(seqs[i]).unwrap(), full.len());
    }
}

/// Greedy tokens of each prompt with 4 active at once equal that prompt run alone, through the
/// batch (parallel 1) and through the single-sequence `generate`; sampled tokens (seed + prompt
/// index) do not depend on the number active either.
#[test]
fn parallel_greedy_tokens_equal_each_prompt_alone() {
    let f = tiny_q8_model();
    let model = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    let ps = prompts(&[12, 3, 40, 1, 25, 7]);
    let run = |parallel: usize, prompts: &[Vec<u32>], sampling: &SamplerConfig| {
        let mut cache = model
            .new_shared_cache(128, 64, flexkern::DType::F16)
            .unwrap();
        let mut cfg = BatchConfig::new(parallel, 10);
        cfg.chunk = 8;
        let (out, stats) = generate_batch(&model, &mut cache, prompts, cfg, sampling, |_, _| {
            Flow::Continue
        })
        .unwrap();
        assert_eq!(cache.num_free_pages(), cache.num_pages());
        (out, stats)
    };
    let (batched, stats) = run(4, &ps, &greedy());
    assert_eq!(stats.max_active, 4);
    assert_eq!(stats.generated_tokens, 60);
    for (i, p) in ps.iter().enumerate() {
        assert_eq!(batched[i].finish, Finish::Length);
        assert_eq!(batched[i].tokens.len(), 10);
        let (alone, _) = run(1, std::slice::from_ref(p), &greedy());
        assert_eq!(batched[i].tokens, alone[0].tokens, "prompt {i}");
        let mut cache = model.new_cache_with(128, flexkern::DType::F16).unwrap();
        let mut s = Sampler::new(greedy()).unwrap();
        let (single, _) = generate(&model, &mut cache, p, 10, &mut s, |_| Flow::Continue).unwrap();
        assert_eq!(batched[i].tokens, single, "prompt {i} through generate");
    }
    let sampled = SamplerConfig {
        seed: 99,
        ..SamplerConfig::default()
    };
    let (a, _) = run(4, &ps, &sampled);
    let (b, _) = run(1, &ps, &sampled);
    assert_eq!(a, b);
    assert_ne!(
        a, batched,
        "sampling at temperature 0.8 picked only argmax tokens"
    );
}

/// Prompts join as others leave (in prompt order), a pool with room for two sequences serves
/// six by reusing freed pages, and stale K/V in reused pages never leaks into a newcomer.
#[test]
fn sequences_join_and_leave_and_reuse_pages() {
    let f = tiny_q8_model();
    let model = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    let ps = prompts(&[20, 20, 20, 20, 20, 20]);
    let stop_after = [1usize, 6, 2, 8, 3, 4];
    let max_new = 8;
    // Each sequence may grow to 27 positions: 2 pages of 16; the pool holds 4.
    let mut cache = model
        .new_shared_cache(128, 4, flexkern::DType::F32)
        .unwrap();
    let mut events = Vec::new();
    let mut counts = [0usize; 6];
    let (out, stats) = generate_batch(
        &model,
        &mut cache,
        &ps,
        BatchConfig::new(8, max_new),
        &greedy(),
        |i, _| {
            events.push(i);
            counts[i] += 1;
            if counts[i] >= stop_after[i] {
                Flow::Stop
            } else {
                Flow::Continue
            }
        },
    )
    .unwrap();
    assert_eq!(stats.max_active, 2, "the pool admits two at a time");
    assert_eq!(cache.num_free_pages(), 4);
    for (i, o) in out.iter().enumerate() {
        let want_finish = if stop_after[i] <= max_new {
            Finish::Stopped
        } else {
            Finish::Length
        };
        assert_eq!(o.finish, want_finish, "prompt {i}");
        assert_eq!(o.tokens.len(), stop_after[i].min(max_new), "prompt {i}");
        let mut alone = model
            .new_shared_cache(128, 4, flexkern::DType::F32)
            .unwrap();
        let (a, _) = generate_batch(
            &model,
            &mut alone,
            std::slice::from_ref(&ps[i]),
            BatchConfig::new(1, o.tokens.len()),
            &greedy(),
            |_, _| Flow::Continue,
        )
        .unwrap();
        assert_eq!(o.tokens, a[0].tokens, "prompt {i} after page reuse");
    }
    // First tokens arrive in prompt order: a prompt joins only when an earlier one left.
    let firsts: Vec<usize> = (0..6)
        .map(|i| events.iter().position(|&e| e == i).unwrap())
        .collect();
    assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{events:?}");
    // Prompt 2 joined when prompt 0 (one token) left: before prompt 1 finished.
    let last1 = events.iter().rposition(|&e| e == 1).unwrap();
    assert!(firsts[2] < last1, "{events:?}");
}

/// A step that needs more pages than are free is `OutOfPages` and changes nothing: the
/// sequences continue exactly as if it never ran. Generation with a prompt larger than the
/// pool, or with the pool held by other sequences, fails the same way instead of waiting.
#[test]
fn pool_exhaustion_is_typed_and_leaves_sequences_intact() {
    let f = tiny_q8_model();
    let model = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    let ps = prompts(&[20, 20]);
    let mut cache = model
        .new_shared_cache(128, 4, flexkern::DType::F32)
        .unwrap();
    let (a, b) = (cache.add_seq(), cache.add_seq());
    let step = [
        SeqTokens {
            seq: a,
            tokens: &ps[0],
        },
        SeqTokens {
            seq: b,
            tokens: &ps[1],
        },
    ];
    model
        .forward_batch(&mut cache, &step, Logits::Last)
        .unwrap();
    assert_eq!(cache.num_free_pages(), 0);
    let more = prompts(&[13]);
    let step = [
        SeqTokens {
            seq: a,
            tokens: &[5],
        },
        SeqTokens {
            seq: b,
            tokens: &more[0],
        },
    ];
    let e = model.forward_batch(&mut cache, &step, Logits::Last);
    assert!(
        matches!(
            e,
            Err(ModelError::Kernel(flexkern::Error::OutOfPages { .. }))
        ),
        "{e:?}"
    );
    assert_eq!(cache.seq_len(a).unwrap(), 20);
    assert_eq!(cache.seq_len(b).unwrap(), 20);
    assert_eq!(cache.num_free_pages(), 0);
    let step = [
        SeqTokens {
            seq: a,
            tokens: &[5],
        },
        SeqTokens {
            seq: b,
            tokens: &[6],
        },
    ];
    let got = model
        .forward_batch(&mut cache, &step, Logits::Last)
        .unwrap();
    for (i, t) in [(0, 5u32), (1, 6)] {
        let mut alone = model.new_cache(128).unwrap();
        let mut full = ps[i].clone();
        full.push(t);
        let want = model.forward(&mut alone, &full, Logits::Last).unwrap();
        let e = rel_err(&got[i * VOCAB..(i + 1) * VOCAB], &want);
        assert!(e <= 1e-5, "sequence {i}: {e:e}");
    }
    // The pool is held by a and b: a new prompt cannot join and nothing would free pages.
    let e = generate_batch(
        &model,
        &mut cache,
        &prompts(&[4]),
        BatchConfig::new(2, 4),
        &greedy(),
        |_, _| Flow::Continue,
    );
    assert!(
        matches!(
            e,
            Err(ModelError::Kernel(flexkern::Error::OutOfPages { .. }))
        ),
        "{e:?}"
    );
    assert_eq!(cache.seq_len(a).unwrap(), 21);
    // A prompt larger than the whole pool: refused before any work.
    let mut small = model
        .new_shared_cache(128, 2, flexkern::DType::F32)
        .unwrap();
    let e = generate_batch(
        &model,
        &mut small,
        &prompts(&[40]),
        BatchConfig::new(2, 4),
        &greedy(),
        |_, _| Flow::Continue,
    );
    assert!(
        matches!(
            e,
            Err(ModelError::Kernel(flexkern::Error::OutOfPages {
                needed: 3,
                free: 2
            }))
        ),
        "{e:?}"
    );
    assert_eq!(small.num_free_pages(), 2);
}

/// Bad batches and configurations are typed errors naming the argument; the cache is intact.
#[test]
fn bad_batches_are_named() {
    let f = tiny_q8_model();
    let model = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    let mut cache = model.new_shared_cache(32, 8, flexkern::DType::F32).unwrap();
    let a = cache.add_seq();
    model
        .forward_batch(
            &mut cache,
            &[SeqTokens {
                seq: a,
                tokens: &[1, 2, 3],
            }],
            Logits::Last,
        )
        .unwrap();
    let arg = |e: ModelError| match e {
        ModelError::InvalidArgument { arg, .. } => arg.to_string(),
        ModelError::Kernel(flexkern::Error::InvalidArgument { arg, .. }) => arg.to_string(),
        ModelError::ContextFull { .. } => "context".into(),
        ModelError::TokenOutOfRange { .. } => "token".into(),
        e => panic!("unexpected {e:?}"),
    };
    let gone = cache.add_seq();
    cache.free_seq(gone).unwrap();
    let long = vec![1u32; 30];
    let cases: [(&[SeqTokens], &str); 6] = [
        (&[], "batch"),
        (
            &[
                SeqTokens {
                    seq: a,
                    tokens: &[1],
                },
                SeqTokens {
                    seq: a,
                    tokens: &[2],
                },
            ],
            "batch",
        ),
        (
            &[SeqTokens {
                seq: a,
                tokens: &[],
            }],
            "tokens",
        ),
        (
            &[SeqTokens {
                seq: gone,
                tokens: &[1],
            }],
            "seq",
        ),
        (
            &[SeqTokens {
                seq: a,
                tokens: &[VOCAB as u32],
            }],
            "token",
        ),
        (
            &[SeqTokens {
                seq: a,
                tokens: &long,
            }],
            "context",
        ),
    ];
    for (batch, want) in cases {
        let e = model
            .forward_batch(&mut cache, batch, Logits::Last)
            .unwrap_err();
        assert_eq!(arg(e), want);
        assert_eq!(cache.seq_len(a).unwrap(), 3);
    }
    assert_eq!(arg(cache.free_seq(cache.default_seq()).unwrap_err()), "seq");
    let gen = |cache: &mut _, ps: &[Vec<u32>], cfg: BatchConfig| {
        generate_batch(&model, cache, ps, cfg, &greedy(), |_, _| Flow::Continue).unwrap_err()
    };
    let mut zero_chunk = BatchConfig::new(1, 4);
    zero_chunk.chunk = 0;
    let ok = prompts(&[3]);
    assert_eq!(
        arg(gen(&mut cache, &ok, BatchConfig::new(0, 4))),
        "parallel"
    );
    assert_eq!(arg(gen(&mut cache, &ok, zero_chunk)), "chunk");
    assert_eq!(
        arg(gen(&mut cache, &[vec![1], vec![]], BatchConfig::new(2, 4))),
        "prompts"
    );
    assert_eq!(
        arg(gen(&mut cache, &[vec![1; 33]], BatchConfig::new(2, 4))),
        "context"
    );
    assert_eq!(cache.seq_len(a).unwrap(), 3);
}

/// A batched step moves what a single step does: one upload (every sequence's token ids,
/// positions, slots and page tables packed) and one download (one logits row per sequence).
#[test]
fn batched_step_is_one_upload_and_one_download() {
    use flexkern::backend::counting::Counting;
    let f = tiny_q8_model();
    let model = Model::load(&f, Counting::new(CpuBackend), |_, _| {}).unwrap();
    let b = model.backend();
    let mut cache = model
        .new_shared_cache(128, 16, flexkern::DType::F32)
        .unwrap();
    let seqs: Vec<_> = (0..3).map(|_| cache.add_seq()).collect();
    let ps = prompts(&[18, 1, 5]);
    for step in 0..3 {
        let batch: Vec<SeqTokens> = seqs
            .iter()
            .zip(&ps)
            .map(|(&seq, p)| SeqTokens {
                seq,
                tokens: if step == 0 { p } else { &p[..1] },
            })
            .collect();
        let before = b.transfers();
        let got = model
            .forward_batch(&mut cache, &batch, Logits::Last)
            .unwrap();
        assert_eq!(got.len(), 3 * VOCAB);
        let now = b.transfers();
        assert_eq!(now.uploads - before.uploads, 1, "step {step}");
        assert_eq!(now.downloads - before.downloads, 1, "step {step}");
        assert_eq!(
            now.download_bytes - before.download_bytes,
            (3 * VOCAB * 4) as u64
        );
        let m: usize = batch.iter().map(|s| s.tokens.len()).sum();
        let pages: usize = seqs
            .iter()
            .map(|&s| cache.seq_len(s).unwrap().div_ceil(16))
            .sum();
        // 3 words a token; 4 offsets, 3 first pages, one index a page.
        assert_eq!(
            now.upload_bytes - before.upload_bytes,
            4 * (3 * m + 4 + 3 + pages) as u64,
            "step {step}"
        );
    }
}

/// A long prompt enters in chunks while the others keep decoding: the short prompt gets a token
/// at every step of the long one's prefill.
#[test]
fn chunked_prompts_do_not_starve_decoding() {
    let f = tiny_q8_model();
    let model = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    let ps = prompts(&[3, 40]);
    let mut cache = model
        .new_shared_cache(128, 16, flexkern::DType::F32)
        .unwrap();
    let mut cfg = BatchConfig::new(2, 8);
    cfg.chunk = 8;
    let mut events = Vec::new();
    let (out, stats) = generate_batch(&model, &mut cache, &ps, cfg, &greedy(), |i, _| {
        events.push(i);
        Flow::Continue
    })
    .unwrap();
    // The 40-token prompt takes 5 steps of 8; prompt 0 samples a token at each of them.
    let first_long = events.iter().position(|&e| e == 1).unwrap();
    assert_eq!(first_long, 5, "{events:?}");
    assert_eq!(stats.steps, 5 + 7);
    let mut alone = model.new_cache(128).unwrap();
    let mut s = Sampler::new(greedy()).unwrap();
    let (want, _) = generate(&model, &mut alone, &ps[1], 8, &mut s, |_| Flow::Continue).unwrap();
    assert_eq!(out[1].tokens, want, "chunked prefill against one prefill");
}

/// A sequence that reaches the cache's `max_len` leaves with `ContextFull` after as many
/// tokens as the single-sequence `generate` gives, and frees its pages.
#[test]
fn a_full_sequence_leaves_as_generate_stops() {
    let f = tiny_q8_model();
    let model = Model::load(&f, CpuBackend, |_, _| {}).unwrap();
    let ps = prompts(&[20, 4]);
    let mut cache = model.new_shared_cache(24, 8, flexkern::DType::F32).unwrap();
    let (out, _) = generate_batch(
        &model,
        &mut cache,
        &ps,
        BatchConfig::new(2, 10),
        &greedy(),
        |_, _| Flow::Continue,
    )
    .unwrap();
    assert_eq!(out[0].finish, Finish::ContextFull);
    assert_eq!(out[0].tokens.len(), 5, "positions 20..24 hold 4 fed tokens");
    assert_eq!(out[1].finish, Finish::Length);
    assert_eq!(cache.num_free_pages(), 8);
    for (i, p) in ps.iter().enumerate() {
        let mut alone = model.new_cache(24).unwrap();
        let mut s = Sampler::new(greedy()).unwrap();
        let (want, _) = generate(&model, &mut alone, p, 10, &mut s, |_| Flow::Continue).unwrap();
        assert_eq!(out[i].tokens, want, "prompt {i}");
    }
}
