//! The CPU backend: rayon over the plan's work list, AVX2/FMA kernels chosen at run time.

mod page_writes;
mod run;
pub(crate) mod simd;
mod tensor_ops;
mod tile;
mod tile_mask;

use crate::attention::check_io;
use crate::attention::kv::{Bound, KvSource, StridedKv};
use crate::attention::plan::Plan;
use crate::attention::problem::{KvLayout, Problem};
use crate::backend::host::HostBuffer;
use crate::backend::{AttnIo, Backend, KvBufs, Pages, Slice};
use crate::device::{Caps, DeviceKind, TilePolicy};
use crate::dtype::DType;
use crate::error::Result;
use crate::kv_cache::PagedKv;
use simd::Isa;
use std::sync::OnceLock;

/// The CPU backend, with the fastest kernels this CPU supports (AVX2/FMA/F16C or portable).
/// `FLEXKERN_FORCE_SCALAR=1` forces the portable kernels for the whole process.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

/// The CPU backend restricted to the portable kernels, so tests cover both paths in one process.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ScalarCpuBackend;

impl CpuBackend {
    /// The portable kernels only.
    #[doc(hidden)]
    pub fn scalar() -> ScalarCpuBackend {
        ScalarCpuBackend
    }

    /// Name of the kernel set in use ("avx2" or "scalar").
    pub fn isa_name(&self) -> &'static str {
        isa().name
    }
}

/// The kernel set of the whole process: the fastest this CPU has, unless
/// `FLEXKERN_FORCE_SCALAR=1` forces the portable kernels. Every CPU kernel (attention, GEMV,
/// the model's tensor ops) follows this one switch.
pub(crate) fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| Isa::detect(flexkern_quant::cpu::env_forces_portable()))
}

/// Per-core L2 bytes as Linux reports it (sysfs), else 1 MiB.
fn l2_bytes() -> usize {
    static L2: OnceLock<usize> = OnceLock::new();
    *L2.get_or_init(|| {
        let dir = "/sys/devices/system/cpu/cpu0/cache";
        (0..8)
            .find_map(|i| {
                let read = |f: &str| std::fs::read_to_string(format!("{dir}/index{i}/{f}")).ok();
                (read("level")?.trim() == "2").then_some(())?;
                let s = read("size")?;
                let s = s.trim();
                let (num, mult) = match s.strip_suffix('K') {
                    Some(n) => (n, 1 << 10),
                    None => match s.strip_suffix('M') {
                        Some(n) => (n, 1 << 20),
                        None => (s, 1),
                    },
                };
                num.parse::<usize>().ok().map(|n| n * mult)
            })
            .unwrap_or(1 << 20)
    })
}

fn caps(isa: Isa) -> Caps {
    let cores = rayon::current_num_threads();
    Caps {
        name: "cpu".into(),
        kind: DeviceKind::Cpu {
            cores,
            l2_bytes: l2_bytes(),
            simd_lanes: if isa.name == "scalar" { 1 } else { 8 },
        },
        workers: cores,
        // This machine's `flexkern tune` entry, if any, over the L2-sized defaults.
        tiles: crate::tune::cpu_tiles(|| TilePolicy::cpu_for_l2(l2_bytes())),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn caps_describe_this_cpu() {
        let c = super::caps(super::isa());
        let crate::device::DeviceKind::Cpu {
            cores, l2_bytes, ..
        } = c.kind
        else {
            panic!("a CPU")
        };
        assert_eq!(cores, rayon::current_num_threads());
        assert!((64 << 10..=64 << 20).contains(&l2_bytes), "{l2_bytes}");
        assert_eq!(c.workers, cores);
    }
}

fn u32s<'a>(s: &Slice<'a, HostBuffer>, arg: &'static str) -> Result<&'a [u32]> {
    let all = s.buf.u32(arg)?;
    crate::backend::check_range(arg, s.start, s.len, all.len())?;
    Ok(&all[s.start..s.start + s.len])
}

/// Binds the buffers to the problem's layouts and runs the plan on the host.
fn attention(isa: Isa, p: &Problem, plan: &Plan, io: AttnIo<'_, HostBuffer>) -> Result<()> {
    check_io(p, &io)?;
    let q = io.q.host_data("q")?;
    let out = io.out.f32_mut("out")?;
    let lse = match io.lse {
        Some(l) => Some(l.f32_mut("lse")?),
        None => None,
    };
    match (&p.kv, io.kv) {
        (KvLayout::Strided { k, v }, KvBufs::Strided { k: kb, v: vb }) => {
            let kv = StridedKv {
                k: Bound {
                    layout: k,
                    data: kb.host_data("k")?,
                },
                v: Bound {
                    layout: v,
                    data: vb.host_data("v")?,
                },
                lens: &p.lens,
            };
            run::attention(isa, p, q, &kv as &dyn KvSource, plan, out, lse)
        }
        (
            KvLayout::Paged(l),
            KvBufs::Paged {
                k,
                v,
                cu_pages,
                first_page,
                page_indices,
            },
        ) => {
            let kv = PagedKv::bind(
                l,
                k.page_buf("k_pages")?,
                v.page_buf("v_pages")?,
                u32s(&cu_pages, "cu_pages")?,
                u32s(&first_page, "first_page")?,
                u32s(&page_indices, "page_indices")?,
                &p.lens,
            )?;
            run::attention(isa, p, q, &kv as &dyn KvSource, plan, out, lse)
        }
        _ => unreachable!("check_io matched the layouts"),
    }
}

/// The memory half of the CPU backend: host buffers, every call runs at once.
macro_rules! host_backend {
    ($t:ty, $isa:expr) => {
        impl $t {
            /// Runs a plan over any host KV source (custom host caches; tests that scatter rows
            /// over memory). `q` is laid out as `p.q` says; `out` `[tokens, Hq, Dv]`.
            pub fn attention_source(
                &self,
                p: &Problem,
                q: crate::tensor::HostData<'_>,
                kv: &dyn KvSource,
                plan: &Plan,
                out: &mut [f32],
                lse: Option<&mut [f32]>,
            ) -> Result<()> {
                if q.len() < p.q.extent || q.dtype() != p.q.dtype {
                    return Err(crate::error::invalid(
                        "q",
                        "does not match the problem's layout",
                    ));
                }
                run::attention($isa, p, q, kv, plan, out, lse)
            }
        }

        impl Backend for $t {
            type Buffer = HostBuffer;

            fn caps(&self) -> Caps {
                caps($isa)
            }
            fn alloc(&self, dtype: DType, len: usize) -> Result<HostBuffer> {
                HostBuffer::zeros(dtype, len)
            }
            fn upload(&self, dst: &mut HostBuffer, at: usize, src: &[u8]) -> Result<()> {
                dst.upload(at, src)
            }
            fn download(&self, src: &HostBuffer, at: usize, dst: &mut [u8]) -> Result<()> {
                src.download(at, dst)
            }
            fn copy(
                &self,
                src: &HostBuffer,
                src_at: usize,
                dst: &mut HostBuffer,
                dst_at: usize,
                len: usize,
            ) -> Result<()> {
                dst.copy_from(src, src_at, dst_at, len)
            }
            fn copy_within(
                &self,
                buf: &mut HostBuffer,
                src_at: usize,
                dst_at: usize,
                len: usize,
            ) -> Result<()> {
                buf.copy_within(src_at, dst_at, len)
            }
            fn synchronize(&self) -> Result<()> {
                Ok(())
            }
            fn attention(
                &self,
                p: &Problem,
                plan: &Plan,
                io: AttnIo<'_, HostBuffer>,
            ) -> Result<()> {
                attention($isa, p, plan, io)
            }
            fn kv_write(
                &self,
                pages: Pages<'_, HostBuffer>,
                slots: Slice<'_, HostBuffer>,
                k: &HostBuffer,
                v: &HostBuffer,
            ) -> Result<()> {
                page_writes::kv_write(pages, slots, k, v)
            }
        }
    };
}

host_backend!(CpuBackend, isa());
host_backend!(ScalarCpuBackend, Isa::detect(true));
