//! `TensorOps`' graph recording on the GPU: a model step's launches captured into a CUDA graph
//! and replayed, its attention nodes re-pointed at each step's plan (`attention::nodes`).
//! `FLEXKERN_CUDA_GRAPH=0` turns recording off (the model then runs every step eagerly).

use crate::attention::{NodeParams, RecordedNode};
use crate::backend::{attn_call, CudaBackend, CudaBuffer};
use crate::runtime::graph::Graph;
use cudarc::driver::sys::CUfunction;
use flexkern::attention::plan::Plan;
use flexkern::attention::problem::Problem;
use flexkern::backend::tensor_ops::GraphId;
use flexkern::backend::AttnIo;
use flexkern::error::{Error, Result};
use std::collections::HashMap;

/// Recorded graphs of one backend.
#[derive(Default)]
pub(crate) struct Graphs {
    next: u64,
    live: HashMap<u64, Recorded>,
    /// Attention calls queued since the recording began.
    attn_calls: usize,
}

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

impl CudaBackend {
    pub(crate) fn graph_begin(&self) -> Result<bool> {
        // Profiling times each op between events: a replay has no ops to time.
        if off() || self.prof.on() || self.dev.capturing() {
            return Ok(false);
        }
        self.graphs.lock().expect("graphs lock").attn_calls = 0;
        self.dev.capture_begin()?;
        Ok(true)
    }

    pub(crate) fn graph_end(&self) -> Result<GraphId> {
        let graph = self.dev.capture_end()?;
        let fs = self.attn_plan.functions();
        let mut nodes = Vec::new();
        if let Some(fs) = fs {
            for (node, p) in graph.kernel_nodes()? {
                // SAFETY: `p` is the node's parameters as the driver returned them.
                nodes.extend(unsafe { RecordedNode::from_params(node, &p, fs) });
            }
        }
        let fs = fs.map_or((0, 0), |(a, m)| (a as usize, m as usize));
        let mut g = self.graphs.lock().expect("graphs lock");
        // Each attention call must be found as a node, or a replay would run stale lengths.
        let found = nodes.iter().filter(|n| !n.is_merge()).count();
        if found != g.attn_calls {
            return Err(Error::Backend {
                backend: "cuda",
                msg: format!(
                    "graph recording: {} attention calls but {found} attention nodes",
                    g.attn_calls
                ),
            });
        }
        g.next += 1;
        let id = g.next;
        g.live.insert(id, Recorded { graph, fs, nodes });
        Ok(GraphId(id))
    }

    pub(crate) fn graph_replay(
        &self,
        id: GraphId,
        (p, _plan, io): (&Problem, &Plan, AttnIo<'_, CudaBuffer>),
    ) -> Result<bool> {
        let mut g = self.graphs.lock().expect("graphs lock");
        let Some(r) = g.live.get_mut(&id.0) else {
            return Ok(false);
        };
        if !r.nodes.is_empty() {
            let call = attn_call(p, &io)?;
            let fs = (r.fs.0 as CUfunction, r.fs.1 as CUfunction);
            let Some(params) = self
                .attn_plan
                .retarget(&self.dev, &call, fs, &mut r.nodes)?
            else {
                return Ok(false);
            };
            set_nodes(&r.graph, params)?;
        }
        r.graph.launch(&self.dev)?;
        Ok(true)
    }

    pub(crate) fn graph_free(&self, id: GraphId) {
        self.graphs.lock().expect("graphs lock").live.remove(&id.0);
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
