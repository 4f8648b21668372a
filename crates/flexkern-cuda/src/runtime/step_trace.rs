//! A timeline of one replayed decode step (`FLEXKERN_CUDA_TRACE=step`). No profiler sees inside
//! a CUDA graph on the lent machines (no nsys; ncu serializes the kernels, so programmatic
//! launch overlaps vanish), so the kernels record it themselves: every module is compiled with
//! the address of one device buffer (`FK_STEP_TRACE` in fk_common.cuh) and each block's thread
//! 0 appends its start, the return of its wait for the previous kernel, its end, its SM and the
//! kernel. `summary` groups the blocks into launches and says what each kernel adds to the
//! step's time.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Records the buffer holds (FK_STEP_TRACE_N); 5 words each after a 2-word counter.
pub const RECORDS: usize = 1 << 18;
/// Words of the buffer.
pub const WORDS: usize = 2 + 5 * RECORDS;

/// Whether `FLEXKERN_CUDA_TRACE=step`, `=step,prologue` or `=step,at=N` (read once).
pub fn enabled() -> bool {
    mode().is_some()
}

/// Where the streamed GEMV stamps a block's "released" time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Released {
    /// At its wait's return (`step`).
    Wait,
    /// After its activation prologue (`step,prologue`; FK_TRACE_PROLOGUE in gemv_stream.cu),
    /// so the difference of two timelines is the prologue.
    Prologue,
    /// Thread 0 at point N of the quantizing prologue, Q8_0 or Q8_K (`step,at=N`, 1-3:
    /// activations loaded, the norm's sum reduced, codes stored; FK_TRACE_POINT in
    /// gemv_acts.cu).
    At(u32),
}

fn mode() -> Option<Released> {
    static ON: std::sync::OnceLock<Option<Released>> = std::sync::OnceLock::new();
    *ON.get_or_init(|| parse_mode(std::env::var("FLEXKERN_CUDA_TRACE").ok().as_deref()))
}

fn parse_mode(v: Option<&str>) -> Option<Released> {
    match v? {
        "step" => Some(Released::Wait),
        "step,prologue" => Some(Released::Prologue),
        s => match s.strip_prefix("step,at=")?.parse() {
            Ok(n @ 1..=3) => Some(Released::At(n)),
            _ => None,
        },
    }
}

/// A traced module: its name, the hash of its source, its kernels by the first line of each.
type TracedModule = (String, u64, Vec<(u32, String)>);
/// Module number -> its entry.
static MODULES: Mutex<Vec<TracedModule>> = Mutex::new(Vec::new());

/// The defines that put a module on the timeline: the buffer's address, its capacity and the
/// module's number (registered with the kernels of `source` on first sight; the same source
/// keeps its number, so the module cache still finds its module).
pub fn defines(buf: u64, name: &str, source: &str) -> String {
    let mut m = MODULES.lock().expect("trace modules lock");
    let hash = flexkern::variant::lowered::fnv1a(source.as_bytes());
    let number = match m.iter().position(|(_, h, _)| *h == hash) {
        Some(i) => i,
        None => {
            m.push((name.to_string(), hash, kernels_of(source)));
            m.len() - 1
        }
    };
    let prologue = match mode() {
        Some(Released::Prologue) => "#define FK_TRACE_PROLOGUE 1\n".to_string(),
        Some(Released::At(n)) => format!("#define FK_TRACE_AT {n}\n"),
        _ => String::new(),
    };
    format!(
        "#define FK_STEP_TRACE 0x{buf:x}ull\n#define FK_STEP_TRACE_N {RECORDS}\n#define FK_TRACE_MODULE {number}\n{prologue}"
    )
}

/// `source`'s kernels by the line each starts on (`__global__`; the name, fk_*, on that line
/// or one of the next two: long signatures wrap).
fn kernels_of(source: &str) -> Vec<(u32, String)> {
    let lines: Vec<&str> = source.lines().collect();
    let fk_call = |l: &str| {
        l.match_indices("fk_").find_map(|(at, _)| {
            let id: String = l[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            l[at + id.len()..].starts_with('(').then_some(id)
        })
    };
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let at = l.find("__global__")?;
            let name = std::iter::once(&l[at..])
                .chain(lines.iter().skip(i + 1).take(2).copied())
                .find_map(fk_call)?;
            Some((i as u32 + 1, name))
        })
        .collect()
}

/// One block: start, the return of its wait, end (ns), SM, kernel (module, line), grid size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Block {
    pub start: u64,
    pub released: u64,
    pub end: u64,
    pub sm: u32,
    pub module: u32,
    pub line: u32,
    pub grid: u64,
}

/// Decodes the buffer (`words`: the counter, then the records; the defines' lines are counted
/// from the source's first line, after the defines this module adds before it).
pub fn parse(words: &[u64]) -> Vec<Block> {
    let n = (words.first().copied().unwrap_or(0) as u32 as usize).min(RECORDS);
    (0..n)
        .filter_map(|i| {
            let r = words.get(2 + 5 * i..2 + 5 * i + 5)?;
            Some(Block {
                start: r[0],
                released: r[1],
                end: r[2],
                sm: (r[3] & 0xffff) as u32,
                line: ((r[3] >> 16) & 0xffff_ffff) as u32,
                module: (r[3] >> 48) as u32,
                grid: r[4],
            })
        })
        .collect()
}

/// One kernel launch of the step, in the order launches ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub kernel: String,
    pub blocks: usize,
    pub start: u64,
    /// The first and the last of its blocks' wait returns.
    pub first_released: u64,
    pub released: u64,
    /// Its blocks' median end, and the last.
    pub mid_end: u64,
    pub end: u64,
}

/// The kernel a (module, line) names: the last `__global__` at or above `line`.
fn kernel_name(module: u32, line: u32) -> String {
    let m = MODULES.lock().expect("trace modules lock");
    let Some((name, _, kernels)) = m.get(module as usize) else {
        return format!("module {module} line {line}");
    };
    // The source's lines are shifted by the defines' three.
    let k = kernels
        .iter()
        .rev()
        .find(|(l, _)| *l + 3 <= line)
        .map_or("?", |(_, k)| k.as_str());
    format!("{k} [{name}]")
}

/// Groups blocks into launches: per kernel, blocks in start order, `grid` at a time.
pub fn launches(blocks: &[Block], name: impl Fn(u32, u32) -> String) -> Vec<Launch> {
    let mut by: BTreeMap<(u32, u32), Vec<&Block>> = BTreeMap::new();
    for b in blocks {
        by.entry((b.module, b.line)).or_default().push(b);
    }
    let mut out = Vec::new();
    for ((module, line), mut bs) in by {
        bs.sort_by_key(|b| b.start);
        let kernel = name(module, line);
        let mut i = 0;
        while i < bs.len() {
            let g = (bs[i].grid as usize).clamp(1, bs.len() - i);
            let part = &bs[i..i + g];
            let mut ends: Vec<u64> = part.iter().map(|b| b.end).collect();
            ends.sort_unstable();
            out.push(Launch {
                kernel: kernel.clone(),
                blocks: g,
                start: part.iter().map(|b| b.start).min().unwrap_or(0),
                first_released: part.iter().map(|b| b.released).min().unwrap_or(0),
                released: part.iter().map(|b| b.released).max().unwrap_or(0),
                mid_end: ends[ends.len() / 2],
                end: ends[ends.len() - 1],
            });
            i += g;
        }
    }
    out.sort_by_key(|l| l.end);
    out
}

/// The blocks of one kernel launched back to back, as launches (`grid` blocks at a time in
/// start order), in the order they ended.
fn one_kernels_launches(blocks: &[Block]) -> Vec<Vec<&Block>> {
    let mut bs: Vec<&Block> = blocks.iter().collect();
    bs.sort_by_key(|b| b.start);
    let mut groups: Vec<Vec<&Block>> = Vec::new();
    let mut i = 0;
    while i < bs.len() {
        let g = (bs[i].grid as usize).clamp(1, bs.len() - i);
        groups.push(bs[i..i + g].to_vec());
        i += g;
    }
    groups.sort_by_key(|g| g.iter().map(|b| b.end).max());
    groups
}

/// Per launch after the first (at most `max` of them), its blocks' start, wait return and end
/// as percentiles (0, 10, 50, 90, 100) in us from the previous launch's last block end: how the
/// launches of one kernel overlap (the GEMV bench's graph, one kernel launched back to back).
pub fn spread(blocks: &[Block], max: usize) -> String {
    let groups = one_kernels_launches(blocks);
    let pct = |mut v: Vec<i64>| -> String {
        v.sort_unstable();
        let at = |q: usize| v[(v.len() - 1) * q / 100] as f64 / 1e3;
        format!(
            "{:.2} {:.2} {:.2} {:.2} {:.2}",
            at(0),
            at(10),
            at(50),
            at(90),
            at(100)
        )
    };
    let mut s = String::from(
        "  per launch, us from the previous launch's last end (p0 p10 p50 p90 p100):\n",
    );
    for w in groups.windows(2).take(max) {
        let prev = w[0].iter().map(|b| b.end).max().unwrap_or(0) as i64;
        let rel =
            |f: fn(&Block) -> u64| w[1].iter().map(|b| f(b) as i64 - prev).collect::<Vec<_>>();
        s += &format!(
            "  start {} | released {} | end {}\n",
            pct(rel(|b| b.start)),
            pct(rel(|b| b.released)),
            pct(rel(|b| b.end))
        );
    }
    s
}

/// Whether the same SMs end late launch after launch: per launch after the first (at most
/// `max`), each SM's mean block end from the previous launch's last end; then the correlation
/// of those per-SM means between consecutive launches and the SMs slowest and fastest on
/// average (us). Near 1: the spread of block ends is a property of the SMs, not of chance.
pub fn sm_spread(blocks: &[Block], max: usize) -> String {
    let groups = one_kernels_launches(blocks);
    let sms = blocks.iter().map(|b| b.sm as usize + 1).max().unwrap_or(0);
    let per: Vec<Vec<f64>> = groups
        .windows(2)
        .take(max)
        .map(|w| {
            let prev = w[0].iter().map(|b| b.end).max().unwrap_or(0) as f64;
            let (mut sum, mut n) = (vec![0.0; sms], vec![0usize; sms]);
            for b in &w[1] {
                sum[b.sm as usize] += (b.end as f64 - prev) / 1e3;
                n[b.sm as usize] += 1;
            }
            sum.iter()
                .zip(&n)
                .map(|(s, &c)| if c > 0 { s / c as f64 } else { f64::NAN })
                .collect()
        })
        .collect();
    let corr = |a: &[f64], b: &[f64]| -> f64 {
        let pts: Vec<(f64, f64)> = a
            .iter()
            .zip(b)
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| (*x, *y))
            .collect();
        let n = pts.len().max(1) as f64;
        let (ma, mb) = (
            pts.iter().map(|p| p.0).sum::<f64>() / n,
            pts.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let cov: f64 = pts.iter().map(|p| (p.0 - ma) * (p.1 - mb)).sum();
        let va: f64 = pts.iter().map(|p| (p.0 - ma).powi(2)).sum();
        let vb: f64 = pts.iter().map(|p| (p.1 - mb).powi(2)).sum();
        cov / (va * vb).sqrt().max(1e-12)
    };
    let mut s = String::from("  per-SM mean end, correlation between consecutive launches:");
    for w in per.windows(2) {
        s += &format!(" {:.2}", corr(&w[0], &w[1]));
    }
    // SMs that ran no block of the measured launches are left out.
    let mut mean: Vec<(usize, f64)> = (0..sms)
        .filter_map(|sm| {
            let v: Vec<f64> = per
                .iter()
                .map(|p| p[sm])
                .filter(|x| x.is_finite())
                .collect();
            (!v.is_empty()).then(|| (sm, v.iter().sum::<f64>() / v.len() as f64))
        })
        .collect();
    mean.sort_by(|a, b| a.1.total_cmp(&b.1));
    let show = |v: &[(usize, f64)]| {
        v.iter()
            .map(|(sm, m)| format!("{sm}:{m:.1}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let k = mean.len().min(10);
    s += &format!(
        "\n  fastest SMs {}\n  slowest SMs {}\n",
        show(&mean[..k]),
        show(&mean[mean.len() - k..])
    );
    s
}

/// What one row of the summary adds up over its launches.
#[derive(Default)]
struct Totals {
    launches: u64,
    added: u64,
    early: u64,
    after: u64,
    gap: u64,
    tail: u64,
}

/// The step's span and, per kernel and the kernel launched before it (a layer's projections
/// share a module: the one after the attention is wo, the one after gate/up is down), its
/// launches and the time they add to the step (each launch is charged from the previous
/// launch's end to its own: the critical path of a stream), how early its blocks started before
/// their wait returned, how long they ran after it, the gap from the previous launch's end to
/// its first wait return, and its tail (median block end to the last).
pub fn summary(blocks: &[Block]) -> String {
    summary_named(blocks, kernel_name)
}

/// `summary` with kernels named by `name(module, line)`.
fn summary_named(blocks: &[Block], name: impl Fn(u32, u32) -> String) -> String {
    let ls = launches(blocks, name);
    let (Some(first), Some(last)) = (ls.iter().map(|l| l.start).min(), ls.last()) else {
        return "step trace: no blocks recorded".into();
    };
    let us = |ns: u64| ns as f64 / 1e3;
    let short = |k: &str| k.split(" [").next().unwrap_or(k).to_string();
    let mut per: BTreeMap<String, Totals> = BTreeMap::new();
    let mut prev = first;
    let mut before = String::from("(start)");
    for l in &ls {
        let e = per
            .entry(format!("{} after {before}", l.kernel))
            .or_default();
        e.launches += 1;
        e.added += l.end.saturating_sub(prev.max(l.start.min(l.end)));
        e.early += l.released.saturating_sub(l.start);
        e.after += l.end.saturating_sub(l.released);
        e.gap += l.first_released.saturating_sub(prev);
        e.tail += l.end.saturating_sub(l.mid_end);
        prev = prev.max(l.end);
        before = short(&l.kernel);
    }
    let mut rows: Vec<_> = per.into_iter().collect();
    rows.sort_by_key(|(_, v)| std::cmp::Reverse(v.added));
    let mut s = format!(
        "step trace: {} launches, {} blocks, {:.1} us from the first block's start to the last block's end\n  kernel after the previous kernel: launches | us added to the step (total, per launch) | us a launch's blocks started before their wait returned | us from the last wait's return to the end | us from the previous launch's end to the first wait return | us from the median block end to the last\n",
        ls.len(),
        blocks.len(),
        us(last.end - first)
    );
    for (k, t) in rows {
        let n = t.launches.max(1);
        s += &format!(
            "  {k}: {} | {:.1}, {:.2} | {:.2} | {:.2} | {:.2} | {:.2}\n",
            t.launches,
            us(t.added),
            us(t.added / n),
            us(t.early / n),
            us(t.after / n),
            us(t.gap / n),
            us(t.tail / n)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_modes_parse() {
        assert_eq!(parse_mode(None), None);
        assert_eq!(parse_mode(Some("step")), Some(Released::Wait));
        assert_eq!(parse_mode(Some("step,prologue")), Some(Released::Prologue));
        assert_eq!(parse_mode(Some("step,at=2")), Some(Released::At(2)));
        for bad in ["step,at=0", "step,at=4", "step,at=x", "steps", "1"] {
            assert_eq!(parse_mode(Some(bad)), None, "{bad}");
        }
    }

    fn b(start: u64, released: u64, end: u64, module: u32, grid: u64) -> Block {
        Block {
            start,
            released,
            end,
            sm: 0,
            module,
            line: 10,
            grid,
        }
    }

    #[test]
    fn sm_spread_correlates_each_sms_ends_across_launches() {
        // Three launches of two blocks, one on SM 0 and one on SM 1; SM 1 ends 100 ns after SM
        // 0 in both measured launches, so their per-SM means correlate fully.
        let on = |sm, start, end| Block {
            sm,
            ..b(start, start, end, 0, 2)
        };
        let bs = [
            on(0, 0, 100),
            on(1, 0, 100),
            on(0, 90, 300),
            on(1, 95, 400),
            on(0, 390, 600),
            on(1, 395, 700),
        ];
        let s = sm_spread(&bs, 6);
        assert!(s.contains("consecutive launches: 1.00\n"), "{s}");
        // SM 0: 0.2 and 0.2 us after the previous launches' ends; SM 1: 0.3 and 0.3.
        assert!(s.contains("fastest SMs 0:0.2 1:0.3\n"), "{s}");
        assert!(s.contains("slowest SMs 0:0.2 1:0.3\n"), "{s}");
    }

    #[test]
    fn spread_measures_each_launch_from_the_previous_launchs_last_end() {
        // Two launches of two blocks: the second's blocks start 30 and 10 ns before the first
        // ends (at 100), return from their wait at 120 and 130, end at 300 and 500.
        let bs = [
            b(0, 0, 90, 0, 2),
            b(5, 5, 100, 0, 2),
            b(70, 120, 300, 0, 2),
            b(90, 130, 500, 0, 2),
        ];
        let s = spread(&bs, 3);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 2, "{s}");
        assert_eq!(
            lines[1],
            "  start -0.03 -0.03 -0.03 -0.03 -0.01 | released 0.02 0.02 0.02 0.02 0.03 | end 0.20 0.20 0.20 0.20 0.40"
        );
    }

    #[test]
    fn blocks_group_into_launches_and_charge_the_critical_path() {
        // Kernel 0 runs twice (two blocks a launch), kernel 1 once between, starting early.
        let bs = [
            b(0, 0, 100, 0, 2),
            b(5, 5, 110, 0, 2),
            b(90, 110, 150, 1, 1),
            b(200, 200, 260, 0, 2),
            b(210, 210, 250, 0, 2),
        ];
        let ls = launches(&bs, |m, _| format!("k{m}"));
        let spans: Vec<_> = ls
            .iter()
            .map(|l| (l.kernel.as_str(), l.blocks, l.start, l.end))
            .collect();
        assert_eq!(
            spans,
            vec![("k0", 2, 0, 110), ("k1", 1, 90, 150), ("k0", 2, 200, 260)]
        );
        let s = summary_named(&bs, |m, _| format!("k{m}"));
        assert!(s.contains("3 launches, 5 blocks, 0.3 us"), "{s}");
        // Rows by kernel and its predecessor: k1 started 20 ns early and added 40; the second
        // k0 waited 50 ns past k1's end (its first block's start) and added 60.
        assert!(
            s.contains("k1 after k0: 1 | 0.0, 0.04 | 0.02 | 0.04 | 0.00 | 0.00"),
            "{s}"
        );
        assert!(
            s.contains("k0 after k1: 1 | 0.1, 0.06 | 0.01 | 0.05 | 0.05 | 0.00"),
            "{s}"
        );
        assert!(s.contains("k0 after (start): 1 | 0.1, 0.11 |"), "{s}");
    }

    #[test]
    fn the_buffer_decodes_its_counted_records() {
        let mut w = vec![0u64; 2 + 10];
        w[0] = 2;
        w[2..7].copy_from_slice(&[10, 12, 20, 3u64 << 48 | 7u64 << 16 | 5, 64]);
        w[7..12].copy_from_slice(&[30, 30, 40, 1u64 << 48 | 9u64 << 16 | 1, 1]);
        let bs = parse(&w);
        assert_eq!(bs.len(), 2);
        assert_eq!(
            bs[0],
            Block {
                start: 10,
                released: 12,
                end: 20,
                sm: 5,
                module: 3,
                line: 7,
                grid: 64
            }
        );
    }

    #[test]
    fn a_count_past_the_records_held_reads_only_those() {
        // The counter says 1000 (or wrapped past 2^32); two records are there.
        let mut w = vec![0u64; 2 + 10];
        w[0] = 1000 | 7 << 32;
        w[2..7].copy_from_slice(&[1, 1, 2, 0, 1]);
        assert_eq!(parse(&w).len(), 2);
        assert!(parse(&[]).is_empty());
        assert!(summary(&[]).contains("no blocks"));
    }

    #[test]
    fn defines_register_the_modules_kernels() {
        let src = "#define X 1\nextern \"C\" __global__ void __launch_bounds__(64) fk_a(int x) {\n}\n__global__ void __launch_bounds__(32)\n    fk_b() {}\n";
        let d = defines(0xabc, "ops_test", src);
        assert!(d.contains("#define FK_STEP_TRACE 0xabcull"));
        let m: u32 = d
            .lines()
            .last()
            .unwrap()
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        // fk_a starts on source line 2, fk_b on line 4 (5 and 7 after the three defines).
        assert_eq!(kernel_name(m, 6), "fk_a [ops_test]");
        assert_eq!(kernel_name(m, 7), "fk_b [ops_test]");
        // The same source again keeps its number (its module stays cached).
        assert_eq!(defines(0xabc, "ops_test", src), d);
    }
}

/// The instrumented kernels compile with the timeline's defines: the element-wise ops, a
/// streamed Q4_0 GEMV and the tensor-core decode attention with its merge. Skipped without
/// libnvrtc.
#[cfg(test)]
#[test]
fn traced_modules_compile() {
    use crate::quant::{GemvConfig, Mode, Stream};
    use crate::runtime::compile::{compile_for, KernelSource};
    if !crate::runtime::nvrtc_present() {
        eprintln!("traced_modules_compile: libnvrtc not found, skipped");
        return;
    }
    let f = flexkern_quant::Format::Q4_0;
    let gemv = GemvConfig {
        acc: true,
        ..GemvConfig::streamed(f, 4096, Mode::Plain, Stream::plan(f, 4096, 1, true, 233472))
            .unwrap()
    }
    .source();
    let (rows, mma) = crate::plan::mma_shape(&crate::plan::h100_query(2, 2, 128, 4))
        .expect("the tensor-core decode kernel");
    let attn = crate::attention::KernelConfig::bf16_paged16_d128(rows, Some(mma)).source(
        &crate::codegen::generate(
            &flexkern::Variant::full()
                .mask(flexkern::builtins::causal())
                .compile()
                .unwrap(),
        )
        .source,
        0,
    );
    let ops = KernelSource {
        name: "ops".into(),
        source: format!(
            "{}\n{}\n{}",
            crate::headers::text(&[crate::headers::COMMON]),
            crate::headers::kv_store(),
            include_str!("../../kernels/ops.cu")
        ),
    };
    for src in [gemv, attn, ops] {
        let traced = KernelSource {
            source: defines(0x7000_0000, &src.name, &src.source) + &src.source,
            name: src.name,
        };
        compile_for(&traced, "sm_90a").unwrap_or_else(|e| panic!("{}: {e}", traced.name));
    }
}
