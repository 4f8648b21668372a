//! CUDA graphs: the device's stream captured into a graph, instantiated, its kernel nodes read
//! and re-pointed, and replayed. A decode step is a few hundred small launches; replaying them
//! as one graph removes the host's per-launch work and most of the GPU's gaps between them.

use super::Device;
use crate::error::{driver, invalid, Result};
use cudarc::driver::result;
use cudarc::driver::sys::{
    self, CUgraph, CUgraphExec, CUgraphNode, CUgraphNodeType, CUstreamCaptureMode,
    CUDA_KERNEL_NODE_PARAMS,
};
use std::sync::atomic::Ordering;

fn check(call: &'static str, r: sys::CUresult) -> Result<()> {
    r.result().map_err(|e| driver(call, e))
}

impl Device {
    /// Starts capturing this device's stream: launches are recorded, not run, until
    /// `capture_end`. Uploads refuse to be captured (`Device::write` fails): a captured copy
    /// would replay whatever the staging arena holds then.
    pub fn capture_begin(&self) -> Result<()> {
        self.bind()?;
        // Relaxed: the allocator may still hand out pooled blocks while capturing.
        // SAFETY: the stream is alive while `self` is.
        unsafe {
            result::stream::begin_capture(
                self.stream(),
                CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
            )
        }
        .map_err(|e| driver("cuStreamBeginCapture", e))?;
        self.capturing.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether the stream is being captured.
    pub fn capturing(&self) -> bool {
        self.capturing.load(Ordering::Acquire)
    }

    /// Ends the capture and instantiates the graph. A capture that an unsupported call
    /// invalidated is an error here.
    pub fn capture_end(&self) -> Result<Graph> {
        self.bind()?;
        self.capturing.store(false, Ordering::Release);
        // SAFETY: ends the capture `capture_begin` started on this stream.
        let graph = unsafe { result::stream::end_capture(self.stream()) }
            .map_err(|e| driver("cuStreamEndCapture", e))?;
        if graph.is_null() {
            return Err(invalid("graph", "the capture recorded nothing"));
        }
        let mut exec: CUgraphExec = std::ptr::null_mut();
        // SAFETY: `graph` is the valid graph just captured.
        let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) };
        if let Err(e) = check("cuGraphInstantiateWithFlags", r) {
            // SAFETY: nothing else refers to the graph.
            unsafe {
                let _ = sys::cuGraphDestroy(graph);
            }
            return Err(e);
        }
        Ok(Graph { graph, exec })
    }
}

/// An instantiated graph (and the graph it came from, whose nodes name its kernels).
pub struct Graph {
    graph: CUgraph,
    exec: CUgraphExec,
}

// SAFETY: graph handles are context-global; every use binds the device's context first.
unsafe impl Send for Graph {}

impl Graph {
    /// Every kernel node with its parameters (`kernelParams` point into the graph's copy).
    pub fn kernel_nodes(&self) -> Result<Vec<(CUgraphNode, CUDA_KERNEL_NODE_PARAMS)>> {
        let mut n = 0usize;
        // SAFETY: a count query on a valid graph.
        check("cuGraphGetNodes", unsafe {
            sys::cuGraphGetNodes(self.graph, std::ptr::null_mut(), &mut n)
        })?;
        let mut nodes = vec![std::ptr::null_mut(); n];
        // SAFETY: `nodes` holds `n` slots.
        check("cuGraphGetNodes", unsafe {
            sys::cuGraphGetNodes(self.graph, nodes.as_mut_ptr(), &mut n)
        })?;
        nodes.truncate(n);
        let mut out = Vec::new();
        for node in nodes {
            let mut t = CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
            // SAFETY: `node` belongs to the graph.
            check("cuGraphNodeGetType", unsafe {
                sys::cuGraphNodeGetType(node, &mut t)
            })?;
            if t != CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
                continue;
            }
            // SAFETY: a kernel node; zeroed params are a valid out-parameter.
            let mut p: CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
            check("cuGraphKernelNodeGetParams", unsafe {
                sys::cuGraphKernelNodeGetParams_v2(node, &mut p)
            })?;
            out.push((node, p));
        }
        Ok(out)
    }

    /// Gives kernel node `node` of the instantiated graph new parameters (same function
    /// family; the driver copies `p.kernelParams` before returning).
    ///
    /// # Safety
    /// `p.kernelParams` must match `p.func`'s parameters and the launch stay in bounds.
    pub unsafe fn set_kernel(&self, node: CUgraphNode, p: &CUDA_KERNEL_NODE_PARAMS) -> Result<()> {
        // SAFETY: the caller's contract.
        check("cuGraphExecKernelNodeSetParams", unsafe {
            sys::cuGraphExecKernelNodeSetParams_v2(self.exec, node, p)
        })
    }

    /// Queues the graph on `dev`'s stream.
    pub fn launch(&self, dev: &Device) -> Result<()> {
        dev.bind()?;
        // SAFETY: an instantiated graph on the context's stream.
        check("cuGraphLaunch", unsafe {
            sys::cuGraphLaunch(self.exec, dev.stream())
        })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: the handles are ours; a queued launch keeps its own reference.
        unsafe {
            let _ = sys::cuGraphExecDestroy(self.exec);
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}
