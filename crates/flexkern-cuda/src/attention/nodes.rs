//! Recorded attention launches served by another step's plan. A CUDA graph of the model's
//! step holds one attention (and merge) launch per layer, all of one problem but their K/V
//! pools; the next step keeps the graph and gives those nodes its own plan (grids, step
//! buffer, lengths), each node keeping its layer's pools.

use super::*;
use cudarc::driver::sys::{CUfunction, CUgraphNode, CUDA_KERNEL_NODE_PARAMS};

/// An attention or merge kernel node of a recorded graph, with the arguments it recorded.
pub struct RecordedNode {
    pub node: CUgraphNode,
    merge: bool,
    /// The node's grid and arguments as last set.
    grid: (u32, u32, u32),
    args: FkArgs,
}

// SAFETY: a graph node handle is plain data used only with its graph's context bound.
unsafe impl Send for RecordedNode {}

impl PlanMemo {
    /// The attention and merge functions of the last plan: what a recording of the calls
    /// since then launched.
    pub fn functions(&self) -> Option<(CUfunction, CUfunction)> {
        let last = self.last.lock().expect("plan memo lock");
        last.as_ref().map(|(_, p)| (p.f_attn, p.f_merge))
    }

    /// Node parameters that run `c`'s plan (through the memo, so one plan serves a step's
    /// layers) in place of each recorded node of `nodes`, each keeping its own K/V pools: only
    /// for the nodes whose grid or arguments change (the plan reuses its buffers, so mostly
    /// none), which are updated to them. `Ok(None)`: the plan launches other kernels than the
    /// recording (record again), or there is nothing to compute.
    pub fn retarget(
        &self,
        dev: &Arc<Device>,
        c: &AttnCall,
        recorded: (CUfunction, CUfunction),
        nodes: &mut [RecordedNode],
    ) -> Result<Option<Vec<NodeParams>>> {
        let r = self.with(dev, c, |p| {
            let has_merge = nodes.iter().any(|n| n.merge);
            if (p.f_attn, p.f_merge) != recorded || p.self_join == has_merge {
                return Ok(None);
            }
            let threads = p.config.threads() as u32;
            let mut out = Vec::new();
            for n in nodes.iter_mut() {
                let mut args = p.args;
                (args.k, args.v) = (n.args.k, n.args.v);
                let (f, grid, block, smem) = if n.merge {
                    (p.f_merge, p.grid_merge, MERGE_THREADS, 0)
                } else {
                    (p.f_attn, p.grid_attn, threads, p.smem_attn)
                };
                if grid == n.grid && args == n.args {
                    continue;
                }
                (n.grid, n.args) = (grid, args);
                out.push(NodeParams {
                    node: n.node,
                    f,
                    grid,
                    block,
                    smem,
                    args: Box::new(args),
                });
            }
            Ok(Some(out))
        })?;
        Ok(r.flatten())
    }
}

impl RecordedNode {
    /// A merge node (else an attention node).
    pub fn is_merge(&self) -> bool {
        self.merge
    }

    /// `node` when it launched one of `fs` (attention, merge), with its recorded arguments.
    ///
    /// # Safety
    /// `p` must be the node's parameters as `cuGraphKernelNodeGetParams` returned them.
    pub unsafe fn from_params(
        node: CUgraphNode,
        p: &CUDA_KERNEL_NODE_PARAMS,
        fs: (CUfunction, CUfunction),
    ) -> Option<RecordedNode> {
        let merge = if p.func == fs.0 {
            false
        } else if p.func == fs.1 {
            true
        } else {
            return None;
        };
        // SAFETY: both kernels take one `FkArgs` by value; the graph owns the copy.
        let args = unsafe { std::ptr::read_unaligned(*p.kernelParams as *const FkArgs) };
        let grid = (p.gridDimX, p.gridDimY, p.gridDimZ);
        Some(RecordedNode {
            node,
            merge,
            grid,
            args,
        })
    }
}

/// New parameters for one recorded node (`args` boxed: the driver reads it through a pointer).
pub struct NodeParams {
    pub node: CUgraphNode,
    f: CUfunction,
    grid: (u32, u32, u32),
    block: u32,
    smem: u32,
    args: Box<FkArgs>,
}

impl NodeParams {
    /// The driver's form; `slot` holds the argument pointer and must outlive the call that
    /// reads the result.
    pub fn driver_params(&mut self, slot: &mut [*mut c_void; 1]) -> CUDA_KERNEL_NODE_PARAMS {
        slot[0] = (&mut *self.args as *mut FkArgs).cast();
        // SAFETY: zeroed is valid for the trailing optional fields (kern, ctx: none).
        let mut p: CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
        p.func = self.f;
        (p.gridDimX, p.gridDimY, p.gridDimZ) = self.grid;
        (p.blockDimX, p.blockDimY, p.blockDimZ) = (self.block, 1, 1);
        p.sharedMemBytes = self.smem;
        p.kernelParams = slot.as_mut_ptr();
        p
    }
}
