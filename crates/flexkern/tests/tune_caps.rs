//! A tune table for this machine reaches the CPU backend's `Caps::tiles` (and so the planner).
//! Its own test binary: the table is read once per process.

use flexkern::attention::plan::plan;
use flexkern::tune::{cpu_device_name, TuneEntry, TuneTable, CPU_ATTENTION};
use flexkern::{AttentionArgs, Backend, CpuBackend, TensorView, Variant};

#[test]
fn tuned_values_reach_caps_and_the_plan() {
    let dir = std::env::temp_dir().join(format!("flexkern-tune-caps-{}", std::process::id()));
    let path = dir.join("tune.json");
    let mut t = TuneTable::new();
    t.upsert(TuneEntry {
        device: cpu_device_name(),
        family: CPU_ATTENTION.into(),
        params: [
            ("prefill_rows", 64),
            ("prefill_kv_block", 32),
            ("decode_kv_block", 256),
            ("min_part_blocks", 3),
            ("parts_per_worker", 2),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        note: String::new(),
    });
    t.write(&path).unwrap();
    std::env::set_var("FLEXKERN_TUNE_FILE", &path);
    let tiles = CpuBackend.caps().tiles;
    assert_eq!(
        (
            tiles.prefill_rows,
            tiles.prefill_kv_block,
            tiles.decode_kv_block,
            tiles.min_part_blocks,
            tiles.parts_per_worker
        ),
        (64, 32, 256, 3, 2)
    );
    // The planner uses them: a 256-token MHA prefill gets 64-row q tiles and 32-key kv tiles.
    let (s, h, d) = (256, 2, 16);
    let data = vec![0.5f32; s * h * d];
    let view = || TensorView::contiguous(&data[..], &[s, h, d]);
    let p = AttentionArgs::new(view(), view(), view())
        .variant(Variant::full())
        .prepare()
        .unwrap();
    let pl = plan(&p, &CpuBackend.caps(), None).unwrap();
    assert_eq!(pl.tiles(0), (64, 32));
    std::fs::remove_dir_all(&dir).ok();
}
