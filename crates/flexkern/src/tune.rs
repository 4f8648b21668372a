//! Tuned tile tables: `flexkern tune` measures tile choices on a device and writes them here;
//! a backend reads its entry when it describes itself (`Caps::tiles`). One JSON file holds
//! entries keyed by device name and kernel family, so CUDA entries ("NVIDIA H100 ...",
//! "cuda-prefill") sit beside the CPU's. No table: the defaults, silently. A table of another
//! format version, one tuned only for other devices, or one that does not parse: the defaults
//! and one warning on stderr.

use crate::device::TilePolicy;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Bumped when a key's meaning changes; older tables are then stale.
pub const FORMAT_VERSION: u32 = 1;
/// The CPU attention kernels' family (prefill tiles and decode splits).
pub const CPU_ATTENTION: &str = "cpu-attention";
/// The CUDA tensor-core attention kernels' family (keys per stage and stages of the Hopper
/// prefill, mma.sync prefill and decode kernels; knobs checked by flexkern-cuda).
pub const CUDA_ATTENTION: &str = "cuda-attention";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneTable {
    pub version: u32,
    pub entries: Vec<TuneEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneEntry {
    /// `device_name()` of the machine it was measured on.
    pub device: String,
    /// Kernel family, e.g. `cpu-attention`.
    pub family: String,
    /// Knob name to value (the family defines the names).
    pub params: BTreeMap<String, u64>,
    /// How it was measured (command, medians), for people reading the file.
    #[serde(default)]
    pub note: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("tune table {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("tune table {path}: not a tune table ({msg})")]
    Corrupt { path: PathBuf, msg: String },
    #[error("tune table {path}: format version {found}, this build reads {FORMAT_VERSION}; run `flexkern tune` again")]
    Version { path: PathBuf, found: u32 },
    #[error("tune table {path}: entry {device:?} / {family}: {msg}")]
    BadEntry {
        path: PathBuf,
        device: String,
        family: String,
        msg: String,
    },
}

/// Records `device`'s `family` entry in the table at `path` (`TuneTable::record`) and returns
/// `wrote <path> [device] knob=value ...` for the command to print.
pub fn save(
    path: &Path,
    device: String,
    family: &str,
    params: BTreeMap<String, u64>,
    note: String,
) -> Result<String, TuneError> {
    let entry = TuneEntry {
        device,
        family: family.into(),
        params,
        note,
    };
    let said = format!("wrote {} {}", path.display(), entry.describe());
    TuneTable::record(path, entry)?;
    Ok(said)
}

impl TuneEntry {
    /// `[device] knob=value ...`, or `[device] (defaults)` for an entry that sets none.
    pub fn describe(&self) -> String {
        let kv: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let kv = if kv.is_empty() {
            "(defaults)".to_string()
        } else {
            kv.join(" ")
        };
        format!("[{}] {kv}", self.device)
    }
}

impl TuneTable {
    pub fn new() -> Self {
        TuneTable {
            version: FORMAT_VERSION,
            entries: Vec::new(),
        }
    }

    /// Reads and checks the format version (entries are checked when applied).
    pub fn read(path: &Path) -> Result<TuneTable, TuneError> {
        let text = std::fs::read_to_string(path).map_err(|source| TuneError::Io {
            path: path.into(),
            source,
        })?;
        // The version first, so an older table says "stale", not "corrupt".
        let version = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("version")?.as_u64());
        if let Some(found) = version.filter(|&v| v != FORMAT_VERSION as u64) {
            return Err(TuneError::Version {
                path: path.into(),
                found: found.min(u32::MAX as u64) as u32,
            });
        }
        serde_json::from_str(&text).map_err(|e| TuneError::Corrupt {
            path: path.into(),
            msg: e.to_string(),
        })
    }

    /// Writes the table as pretty JSON (through a temporary file, so a reader never sees half).
    pub fn write(&self, path: &Path) -> Result<(), TuneError> {
        let io = |source| TuneError::Io {
            path: path.into(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| TuneError::Corrupt {
            path: path.into(),
            msg: e.to_string(),
        })?;
        let tmp = path.with_extension("json.partial");
        std::fs::write(&tmp, text + "\n").map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Adds `e` to the table at `path` (keeping other devices' and families' entries; a
    /// stale or corrupt file is replaced, with a note on stderr) and writes it back.
    pub fn record(path: &Path, e: TuneEntry) -> Result<(), TuneError> {
        let mut table = match TuneTable::read(path) {
            Ok(t) => t,
            Err(_) if !path.exists() => TuneTable::new(),
            Err(err) => {
                eprintln!("{err}: replacing it");
                TuneTable::new()
            }
        };
        table.version = FORMAT_VERSION;
        table.upsert(e);
        table.write(path)
    }

    pub fn entry(&self, device: &str, family: &str) -> Option<&TuneEntry> {
        self.entries
            .iter()
            .find(|e| e.device == device && e.family == family)
    }

    /// Adds `e`, replacing the entry of the same device and family.
    pub fn upsert(&mut self, e: TuneEntry) {
        self.entries
            .retain(|x| !(x.device == e.device && x.family == e.family));
        self.entries.push(e);
    }
}

/// The CPU attention knobs a table may set, with their accepted ranges (anything else is a
/// bad entry: a hand-edited 0 would otherwise reach the planner's clamps).
const CPU_KNOBS: [(&str, u64, u64); 5] = [
    ("prefill_rows", 16, 1024),
    ("prefill_kv_block", 16, 512),
    ("decode_kv_block", 16, 1024),
    ("min_part_blocks", 1, 64),
    ("parts_per_worker", 1, 16),
];

/// `defaults` with the entry's knobs applied; an unknown knob or a value out of range is an
/// error naming it.
pub fn apply_cpu(
    defaults: &TilePolicy,
    params: &BTreeMap<String, u64>,
) -> Result<TilePolicy, String> {
    let mut t = defaults.clone();
    for (k, &v) in params {
        let Some(&(_, lo, hi)) = CPU_KNOBS.iter().find(|(n, ..)| n == k) else {
            return Err(format!("unknown knob {k:?}"));
        };
        if !(lo..=hi).contains(&v) || (k.ends_with("block") && !v.is_multiple_of(16)) {
            return Err(format!(
                "{k} = {v} is outside {lo}..={hi} (blocks: multiples of 16)"
            ));
        }
        let v = v as usize;
        match k.as_str() {
            "prefill_rows" => t.prefill_rows = v,
            "prefill_kv_block" => t.prefill_kv_block = v,
            "decode_kv_block" => t.decode_kv_block = v,
            "min_part_blocks" => t.min_part_blocks = v,
            _ => t.parts_per_worker = v,
        }
    }
    Ok(t)
}

/// The CPU policy from the table at `path` for `device`: (policy, warning). A missing file
/// gives the defaults and no warning.
pub fn load_cpu(
    path: Option<&Path>,
    device: &str,
    defaults: TilePolicy,
) -> (TilePolicy, Option<String>) {
    let (t, w) = load(path, device, CPU_ATTENTION, |p| apply_cpu(&defaults, p));
    (t.unwrap_or(defaults), w)
}

/// `apply` of `device`'s `family` entry in the table at `path`: (its result, a warning). No
/// result where there is no file (silently), the table is tuned only for other families
/// (silently), or it is stale, corrupt, tuned for another device, or its entry is refused
/// (with a warning): the caller keeps its defaults.
pub fn load<T>(
    path: Option<&Path>,
    device: &str,
    family: &str,
    apply: impl FnOnce(&BTreeMap<String, u64>) -> Result<T, String>,
) -> (Option<T>, Option<String>) {
    let Some(path) = path.filter(|p| p.exists()) else {
        return (None, None);
    };
    let warn = |e: TuneError| (None, Some(format!("warning: {e}; using the default tiles")));
    let table = match TuneTable::read(path) {
        Ok(t) => t,
        Err(e) => return warn(e),
    };
    match table.entry(device, family) {
        Some(e) => match apply(&e.params) {
            Ok(t) => (Some(t), None),
            Err(msg) => warn(TuneError::BadEntry {
                path: path.into(),
                device: e.device.clone(),
                family: e.family.clone(),
                msg,
            }),
        },
        None => {
            let others: Vec<&str> = table
                .entries
                .iter()
                .filter(|e| e.family == family)
                .map(|e| e.device.as_str())
                .collect();
            if others.is_empty() {
                // Tuned for other kernel families only: nothing stale here.
                return (None, None);
            }
            let w = format!(
                "warning: tune table {}: {family} tuned for {} but this device is {device:?}; \
                 using the default tiles (run `flexkern tune`)",
                path.display(),
                others.join(", ")
            );
            (None, Some(w))
        }
    }
}

/// `$FLEXKERN_TUNE_FILE`, else `<cache dir>/tune.json` (`$FLEXKERN_CACHE_DIR`,
/// `$XDG_CACHE_HOME/flexkern`, `~/.cache/flexkern`).
pub fn table_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FLEXKERN_TUNE_FILE") {
        return Some(PathBuf::from(p));
    }
    let dir = if let Some(d) = std::env::var_os("FLEXKERN_CACHE_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(d).join("flexkern")
    } else {
        PathBuf::from(std::env::var_os("HOME")?).join(".cache/flexkern")
    };
    Some(dir.join("tune.json"))
}

/// This CPU as a table key: its model name, family and model numbers (VMs often report a
/// bare "AMD EPYC" for several generations) and logical CPU count, e.g.
/// `"AMD EPYC (family 25 model 1, 2 CPUs)"`.
pub fn cpu_device_name() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let model = field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    match (field("cpu family"), field("model")) {
        (Some(f), Some(m)) => format!("{model} (family {f} model {m}, {cpus} CPUs)"),
        _ => format!("{model} ({cpus} CPUs)"),
    }
}

/// The CPU backend's tiles: `defaults` overlaid by this machine's tuned entry, read once per
/// process (a warning, if any, printed once).
pub(crate) fn cpu_tiles(defaults: impl FnOnce() -> TilePolicy) -> TilePolicy {
    static TILES: OnceLock<TilePolicy> = OnceLock::new();
    TILES
        .get_or_init(|| {
            let (t, warning) = load_cpu(table_path().as_deref(), &cpu_device_name(), defaults());
            if let Some(w) = warning {
                eprintln!("{w}");
            }
            t
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("flexkern-tune-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    fn entry(device: &str, rows: u64) -> TuneEntry {
        TuneEntry {
            device: device.into(),
            family: CPU_ATTENTION.into(),
            params: [
                ("prefill_rows".to_string(), rows),
                ("min_part_blocks".into(), 2),
            ]
            .into_iter()
            .collect(),
            note: "test".into(),
        }
    }

    #[test]
    fn round_trip_and_apply() {
        let p = tmp("rt.json");
        let mut t = TuneTable::new();
        t.upsert(entry("cpu A", 128));
        t.upsert(entry("cpu B", 64));
        t.upsert(entry("cpu A", 512));
        t.write(&p).unwrap();
        let back = TuneTable::read(&p).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.entries.len(), 2);
        let (pol, w) = load_cpu(Some(&p), "cpu A", TilePolicy::cpu());
        assert_eq!(w, None);
        assert_eq!((pol.prefill_rows, pol.min_part_blocks), (512, 2));
        assert_eq!(pol.decode_kv_block, TilePolicy::cpu().decode_kv_block);
    }

    #[test]
    fn missing_table_is_silent() {
        let (pol, w) = load_cpu(Some(&tmp("none.json")), "cpu A", TilePolicy::cpu());
        assert_eq!((pol, w), (TilePolicy::cpu(), None));
        assert_eq!(load_cpu(None, "x", TilePolicy::cpu()).1, None);
    }

    #[test]
    fn corrupt_stale_and_bad_tables_warn_and_fall_back() {
        let def = TilePolicy::cpu();
        let check = |name: &str, text: &str, device: &str, needle: &str| {
            let p = tmp(name);
            std::fs::write(&p, text).unwrap();
            let (pol, w) = load_cpu(Some(&p), device, def.clone());
            assert_eq!(pol, def, "{name}");
            let w = w.unwrap_or_else(|| panic!("{name}: no warning"));
            assert!(
                w.contains(needle) && w.starts_with("warning:"),
                "{name}: {w}"
            );
        };
        check(
            "garbage.json",
            "{\"version\": 1, \"entries\": [",
            "cpu A",
            "not a tune table",
        );
        check("binary.json", "\u{0}\u{1}PK", "cpu A", "not a tune table");
        check(
            "v0.json",
            "{\"version\": 0, \"entries\": []}",
            "cpu A",
            "format version 0",
        );
        let mut t = TuneTable::new();
        t.upsert(entry("cpu B", 128));
        let other = serde_json::to_string(&t).unwrap();
        check("other.json", &other, "cpu A", "tuned for cpu B");
        t.upsert(entry("cpu A", 0));
        let zero = serde_json::to_string(&t).unwrap();
        check("zero.json", &zero, "cpu A", "prefill_rows = 0");
        let unknown = zero.replace("prefill_rows", "prefill_cols");
        check("unknown.json", &unknown, "cpu A", "unknown knob");
        // A table with only another family (a GPU's) is not stale for the CPU.
        let mut g = TuneTable::new();
        g.upsert(TuneEntry {
            family: "cuda-prefill".into(),
            ..entry("NVIDIA H100", 128)
        });
        let p = tmp("gpu.json");
        g.write(&p).unwrap();
        assert_eq!(
            load_cpu(Some(&p), "cpu A", def.clone()),
            (def.clone(), None)
        );
    }
}
