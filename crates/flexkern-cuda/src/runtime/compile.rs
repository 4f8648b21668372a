//! NVRTC compilation with a module cache in memory and on disk.
//!
//! A module is keyed by a stable hash of its full source, the NVRTC options, the target
//! architecture, the driver and NVRTC versions. On disk it is
//! `<cache dir>/<readable name>_<hash8>.cubin`; the directory is `$FLEXKERN_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/flexkern/cuda`, else `~/.cache/flexkern/cuda`.

use super::Device;
use crate::error::{driver, CudaError, Result};
use cudarc::driver::result::module;
use cudarc::driver::sys::{CUfunction, CUmodule};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use flexkern::variant::lowered::fnv1a;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A complete kernel source and a readable module name (`decode_paged_bf16_hd128`).
#[derive(Clone, Debug)]
pub struct KernelSource {
    pub name: String,
    pub source: String,
}

/// Where a module came from, and how long it took (for `verify`/`bench` reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Compiled,
    Disk,
    Memory,
}

#[derive(Clone, Debug)]
pub struct LoadStat {
    pub name: String,
    pub origin: Origin,
    pub ms: f64,
}

pub struct Module {
    module: CUmodule,
    functions: Mutex<HashMap<String, usize>>,
    /// (kernel, threads, dynamic shared memory) -> resident blocks per SM.
    occupancy: Mutex<HashMap<(String, u32, usize), usize>>,
}
// SAFETY: module and function handles are context-global, usable from any thread with the
// context current.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Module {
    /// The `extern "C"` kernel `name`.
    pub fn function(&self, name: &str) -> Result<CUfunction> {
        let mut f = self.functions.lock().expect("functions lock");
        if let Some(&p) = f.get(name) {
            return Ok(p as CUfunction);
        }
        let c = CString::new(name).expect("kernel names have no NUL");
        // SAFETY: the module is loaded until the cache is dropped.
        let func = unsafe { module::get_function(self.module, c) }
            .map_err(|e| driver("cuModuleGetFunction", e))?;
        f.insert(name.to_string(), func as usize);
        Ok(func)
    }

    /// The device address and size of the module's global variable `name`.
    pub fn global(&self, name: &str) -> Result<(u64, usize)> {
        let c = CString::new(name).expect("variable names have no NUL");
        // SAFETY: the module is loaded until the cache is dropped.
        unsafe { module::get_global(self.module, c) }.map_err(|e| driver("cuModuleGetGlobal", e))
    }

    /// The kernel `name` ready to launch with `threads` threads and `smem` bytes of dynamic
    /// shared memory (its opt-in limit raised once), and how many such blocks one SM holds
    /// (the planner sizes work in waves of them). Asked of the driver once per shape.
    pub fn kernel(&self, name: &str, threads: u32, smem: usize) -> Result<(CUfunction, usize)> {
        let f = self.function(name)?;
        let key = (name.to_string(), threads, smem);
        let mut occ = self.occupancy.lock().expect("occupancy lock");
        if let Some(&n) = occ.get(&key) {
            return Ok((f, n));
        }
        use cudarc::driver::result::{function, occupancy};
        use cudarc::driver::sys::CUfunction_attribute as A;
        // SAFETY: `f` belongs to this loaded module; the limit stays within the device's opt-in
        // (the callers size `smem` against it).
        // The limit only ever rises: matrices of another k share this function, and lowering
        // it for a smaller one made their launches fail (verify caught it, racing threads).
        let most = occ
            .iter()
            .filter(|((n, _, _), _)| n == name)
            .map(|((_, _, s), _)| *s)
            .max()
            .unwrap_or(0);
        let n = unsafe {
            // Static and dynamic shared memory above 48 KB together need the opt-in.
            if smem > most {
                function::set_function_attribute(
                    f,
                    A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .map_err(|e| driver("cuFuncSetAttribute", e))?;
            }
            occupancy::max_active_block_per_multiprocessor(f, threads as i32, smem)
                .map_err(|e| driver("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))?
        };
        let n = (n as usize).max(1);
        occ.insert(key, n);
        Ok((f, n))
    }
}

#[derive(Default)]
pub struct ModuleCache {
    loaded: Mutex<HashMap<u64, Arc<Module>>>,
    /// Modules by a caller's key that determines the source (`Device::module_keyed`).
    keyed: Mutex<HashMap<String, Arc<Module>>>,
    pub(crate) stats: Mutex<Vec<LoadStat>>,
}

impl ModuleCache {
    pub(crate) fn unload_all(&self) {
        if let Ok(mut k) = self.keyed.lock() {
            k.clear();
        }
        if let Ok(mut m) = self.loaded.lock() {
            for (_, md) in m.drain() {
                // SAFETY: no launch is in flight (the device synchronized first).
                unsafe {
                    let _ = module::unload(md.module);
                }
            }
        }
    }
}

/// The on-disk cache directory.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FLEXKERN_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("flexkern/cuda"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/flexkern/cuda"))
}

fn nvrtc_version() -> (i32, i32) {
    let (mut a, mut b) = (0, 0);
    // SAFETY: writes two ints; the library was probed first.
    unsafe {
        let _ = nvrtc_sys::nvrtcVersion(&mut a, &mut b);
    }
    (a, b)
}

/// NVRTC options for `arch`: IEEE division and square root, no fast math (the CPU semantics).
pub fn options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".into(),
        "--fmad=true".into(),
        "-default-device".into(),
    ]
}

/// Compiles `src` for `arch` (e.g. `sm_90a`) without a device: NVRTC alone.
pub fn compile_for(src: &KernelSource, arch: &str) -> Result<Vec<u8>> {
    if !super::nvrtc_present() {
        return Err(CudaError::NoNvrtc("libnvrtc could not be loaded".into()));
    }
    compile_cubin(src, &options(arch)).map(|(bin, _)| bin)
}

/// `compile_for` with ptxas's resource report: (cubin, the compile log holding each kernel's
/// registers, spill stores / loads and stack bytes).
pub fn compile_verbose(src: &KernelSource, arch: &str) -> Result<(Vec<u8>, String)> {
    if !super::nvrtc_present() {
        return Err(CudaError::NoNvrtc("libnvrtc could not be loaded".into()));
    }
    let mut opts = options(arch);
    opts.push("--ptxas-options=-v".into());
    compile_cubin(src, &opts)
}

/// Parses ptxas's report: (most registers of any kernel, spill bytes, stack-frame bytes).
#[cfg(test)]
pub(crate) fn ptxas_resources(log: &str) -> (u32, u32, u32) {
    let (mut regs, mut spills, mut stack) = (0, 0, 0);
    let num = |s: &str| s.trim().parse::<u32>().unwrap_or(0);
    for line in log.lines() {
        if let Some(i) = line.find("Used ") {
            let v = line[i + 5..].split_whitespace().next().map_or(0, num);
            regs = regs.max(v);
        }
        // ".     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
        for part in line.trim_start_matches(['.', ' ']).split(',') {
            let v = part.split_whitespace().next().map_or(0, num);
            if part.contains("stack frame") {
                stack += v;
            } else if part.contains("spill") {
                spills += v;
            }
        }
    }
    (regs, spills, stack)
}

/// (cubin, compile log).
fn compile_cubin(src: &KernelSource, opts: &[String]) -> Result<(Vec<u8>, String)> {
    let csrc = CString::new(src.source.as_str()).map_err(|_| CudaError::Compile {
        module: src.name.clone(),
        log: "source holds a NUL byte".into(),
    })?;
    let cname = CString::new(format!("{}.cu", src.name)).expect("names have no NUL");
    let prog = nvrtc::create_program(&csrc, Some(&cname)).map_err(|e| CudaError::Compile {
        module: src.name.clone(),
        log: format!("{e:?}"),
    })?;
    // SAFETY: `prog` is alive until destroyed below; buffers are sized by NVRTC's answers.
    let out = unsafe {
        let res = nvrtc::compile_program(prog, opts);
        let out = match res {
            Err(_) => {
                let log = nvrtc::get_program_log(prog)
                    .map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned())
                    .unwrap_or_default();
                Err(CudaError::Compile {
                    module: src.name.clone(),
                    log,
                })
            }
            Ok(()) => {
                let mut n = 0usize;
                let r = nvrtc_sys::nvrtcGetCUBINSize(prog, &mut n);
                let mut bin = vec![0u8; n];
                let r2 = nvrtc_sys::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast());
                if r.result().is_err() || r2.result().is_err() || n == 0 {
                    Err(CudaError::Compile {
                        module: src.name.clone(),
                        log: "no cubin (is the architecture a real one?)".into(),
                    })
                } else {
                    let log = nvrtc::get_program_log(prog)
                        .map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned())
                        .unwrap_or_default();
                    Ok((bin, log))
                }
            }
        };
        let _ = nvrtc::destroy_program(prog);
        out
    };
    out
}

impl Device {
    /// The loaded module for `src`: from memory, else the disk cache, else NVRTC.
    pub fn module(&self, src: &KernelSource) -> Result<Arc<Module>> {
        // On the step timeline every module records into one buffer (compiled in; such
        // modules never go to the disk cache).
        let traced;
        let (src, disk) = match self.step_trace_buf()? {
            Some(buf) => {
                traced = KernelSource {
                    name: src.name.clone(),
                    source: super::step_trace::defines(buf, &src.name, &src.source) + &src.source,
                };
                (&traced, false)
            }
            None => (src, true),
        };
        let arch = self.props.arch_flag();
        let opts = options(&arch);
        let nv = nvrtc_version();
        let key_text = format!(
            "{}\n{}\n{arch}\n{}\n{}.{}",
            src.source,
            opts.join(" "),
            self.props.driver_version,
            nv.0,
            nv.1
        );
        let key = fnv1a(key_text.as_bytes());
        if let Some(m) = self.modules.loaded.lock().expect("modules lock").get(&key) {
            return Ok(m.clone());
        }
        let t0 = Instant::now();
        let file = cache_dir()
            .filter(|_| disk)
            .map(|d| d.join(format!("{}_{:08x}.cubin", src.name, key as u32)));
        let (bin, origin) = match file.as_ref().and_then(|f| std::fs::read(f).ok()) {
            Some(b) if !b.is_empty() => (b, Origin::Disk),
            _ => {
                if !super::nvrtc_present() {
                    return Err(CudaError::NoNvrtc(
                        "libnvrtc could not be loaded (add the CUDA toolkit's lib64 to LD_LIBRARY_PATH)".into(),
                    ));
                }
                let b = compile_cubin(src, &opts)?.0;
                if let Some(f) = &file {
                    // Write-then-rename: a concurrent reader never sees half a file.
                    if let Some(d) = f.parent() {
                        let _ = std::fs::create_dir_all(d);
                    }
                    let tmp = f.with_extension(format!("tmp{}", std::process::id()));
                    if std::fs::write(&tmp, &b).is_ok() {
                        let _ = std::fs::rename(&tmp, f);
                    }
                }
                (b, Origin::Compiled)
            }
        };
        self.bind()?;
        // SAFETY: `bin` is a cubin NVRTC produced for this device's architecture.
        let m = unsafe { module::load_data(bin.as_ptr().cast()) }
            .map_err(|e| driver("cuModuleLoadData", e))?;
        let m = Arc::new(Module {
            module: m,
            functions: Mutex::new(HashMap::new()),
            occupancy: Mutex::new(HashMap::new()),
        });
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        self.modules
            .stats
            .lock()
            .expect("stats lock")
            .push(LoadStat {
                name: src.name.clone(),
                origin,
                ms,
            });
        let mut loaded = self.modules.loaded.lock().expect("modules lock");
        Ok(loaded.entry(key).or_insert(m).clone())
    }

    /// The module of the source `build` makes, looked up by `key` first: launches made every
    /// step (one per layer) skip building, hashing and keying a source of tens of KB. `key`
    /// must determine the source (the kernel configuration and variant key it is built from).
    pub fn module_keyed(
        &self,
        key: &str,
        build: impl FnOnce() -> KernelSource,
    ) -> Result<Arc<Module>> {
        if let Some(m) = self.modules.keyed.lock().expect("modules lock").get(key) {
            return Ok(m.clone());
        }
        let m = self.module(&build())?;
        let mut keyed = self.modules.keyed.lock().expect("modules lock");
        Ok(keyed.entry(key.to_string()).or_insert(m).clone())
    }

    /// Every module load so far (compiled, from disk), in order.
    pub fn load_stats(&self) -> Vec<LoadStat> {
        self.modules.stats.lock().expect("stats lock").clone()
    }
}
