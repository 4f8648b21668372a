//! `TensorOps`' graph recording on the GPU: a model step's launches captured into a CUDA graph
//! and replayed, its attention nodes re-pointed at each step's plan (`attention::nodes`).
//! `FLEXKERN_CUDA_GRAPH=0` turns recording off (the model then runs every step eagerly).

use crate::attention::{AttnCall, NodeParams, PlanMemo, RecordedNode};
use crate::runtime::graph::Graph;
use crate::runtime::Device;
use cudarc::driver::sys::CUfunction;
use flexkern::backend::tensor_ops::GraphId;
use flexkern::error::{Error, Result};
use std::collections::HashMap;

/// Recorded graphs of one backend.
#[derive(Default)]
pub(crate) struct Graphs {
    next: u64,
    live: HashMap<u64, Recorded>,
    /// Attention calls queued since the recording began.
    attn_calls: usize,
    /// Replays so far (the step timeline records one, `TRACED_REPLAY`).
    replays: u64,
}

/// The replay whose timeline `FLEXKERN_CUDA_TRACE=step` prints (a decode step well past the
/// first, whose plans and caches are warm).
const TRACED_REPLAY: u64 = 32;

impl Graphs {
    /// Counts an attention call of the recording in progress.
    pub(crate) fn note_attention(&mut self) {
        self.attn_calls += 1;
    }
}

struct Recorded {
    graph: Graph,
    /// The attention and merge functions the recording launched.
    fs: (usize, usize),
    nodes: Vec<RecordedNode>,
}

fn off() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| std::env::var("FLEXKERN_CUDA_GRAPH").is_ok_and(|v| v == "0"))
}

impl Graphs {
    /// Starts capturing the device's stream (false: recording is off, the backend is
    /// profiling, or a capture is already running).
    pub(crate) fn begin(&mut self, dev: &Device, profiling: bool) -> Result<bool> {
        // Profiling times each op between events: a replay has no ops to time.
        if off() || profiling || dev.capturing() {
            return Ok(false);
        }
        self.attn_calls = 0;
        dev.capture_begin()?;
        Ok(true)
    }

    /// Ends the capture; the attention plan `memo` names the kernels whose nodes a replay
    /// re-points.
    pub(crate) fn end(&mut self, dev: &Device, memo: &PlanMemo) -> Result<GraphId> {
        let graph = dev.capture_end()?;
        let fs = memo.functions();
        let mut nodes = Vec::new();
        if let Some(fs) = fs {
            for (node, p) in graph.kernel_nodes()? {
                // SAFETY: `p` is the node's parameters as the driver returned them.
                nodes.extend(unsafe { RecordedNode::from_params(node, &p, fs) });
            }
        }
        let fs = fs.map_or((0, 0), |(a, m)| (a as usize, m as usize));
        // Each attention call must be found as a node, or a replay would run stale lengths.
        let found = nodes.iter().filter(|n| !n.is_merge()).count();
        if found != self.attn_calls {
            return Err(Error::Backend {
                backend: "cuda",
                msg: format!(
                    "graph recording: {} attention calls but {found} attention nodes",
                    self.attn_calls
                ),
            });
        }
        self.next += 1;
        let id = self.next;
        if crate::runtime::step_trace::enabled() {
            eprintln!("step trace: recorded graph {id} ({found} attention nodes)");
        }
        self.live.insert(id, Recorded { graph, fs, nodes });
        Ok(GraphId(id))
    }

    /// Replays graph `id` with its attention nodes re-pointed at `call`'s plan (false: no such
    /// graph, or the plan needs other kernels: the caller runs the step eagerly).
    pub(crate) fn replay<'a>(
        &mut self,
        id: GraphId,
        dev: &std::sync::Arc<Device>,
        memo: &PlanMemo,
        call: impl FnOnce() -> Result<AttnCall<'a>>,
    ) -> Result<bool> {
        let Some(r) = self.live.get_mut(&id.0) else {
            if crate::runtime::step_trace::enabled() {
                eprintln!("step trace: replay declined: no graph {}", id.0);
            }
            return Ok(false);
        };
        if !r.nodes.is_empty() {
            let call = call()?;
            let fs = (r.fs.0 as CUfunction, r.fs.1 as CUfunction);
            let Some(params) = memo.retarget(dev, &call, fs, &mut r.nodes)? else {
                if crate::runtime::step_trace::enabled() {
                    eprintln!("step trace: replay declined: the step's plan launches other attention kernels");
                }
                return Ok(false);
            };
            set_nodes(&r.graph, params)?;
        }
        self.replays += 1;
        let tracing = crate::runtime::step_trace::enabled();
        if tracing && self.replays == 1 {
            eprintln!("step trace: replaying; replay {TRACED_REPLAY}'s timeline follows");
        }
        let traced = tracing && self.replays == TRACED_REPLAY;
        if traced {
            dev.step_trace_reset()?;
        }
        r.graph.launch(dev)?;
        if traced {
            if let Some(b) = dev.step_trace_blocks()? {
                eprintln!(
                    "replay {TRACED_REPLAY}: {}",
                    crate::runtime::step_trace::summary(&b)
                );
            }
        }
        Ok(true)
    }

    pub(crate) fn free(&mut self, id: GraphId) {
        self.live.remove(&id.0);
    }
}

fn set_nodes(graph: &Graph, params: Vec<NodeParams>) -> Result<()> {
    for mut np in params {
        let mut slot = [std::ptr::null_mut(); 1];
        let p = np.driver_params(&mut slot);
        // SAFETY: the plan's own function, grid and arguments (checked when it was made), with
        // the K/V pools the node recorded, which the recording's caller keeps alive.
        unsafe { graph.set_kernel(np.node, &p) }.map_err(Error::from)?;
    }
    Ok(())
}
