//! CUDA events for timing whole calls on the stream.

use super::Device;
use crate::error::{driver, Result};
use cudarc::driver::result::event;
use cudarc::driver::sys::{CUevent, CUevent_flags};

pub struct Event(CUevent);

// SAFETY: a CUevent is a driver handle, usable from any thread (the profiler's table, behind a
// mutex, holds some until it reads them).
unsafe impl Send for Event {}

impl Event {
    pub fn new(dev: &Device) -> Result<Event> {
        dev.bind()?;
        event::create(CUevent_flags::CU_EVENT_DEFAULT)
            .map(Event)
            .map_err(|e| driver("cuEventCreate", e))
    }
    pub fn record(&self, dev: &Device) -> Result<()> {
        // SAFETY: both handles are alive.
        unsafe { event::record(self.0, dev.stream()) }.map_err(|e| driver("cuEventRecord", e))
    }
    /// Milliseconds from `self` to `end` (waits for `end`).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        // SAFETY: both events were recorded.
        unsafe {
            event::synchronize(end.0).map_err(|e| driver("cuEventSynchronize", e))?;
            event::elapsed(self.0, end.0).map_err(|e| driver("cuEventElapsedTime", e))
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: not used after this.
        unsafe {
            let _ = event::destroy(self.0);
        }
    }
}
