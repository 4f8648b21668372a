//! `FLEXKERN_CUDA_PROFILE=1`: where a backend's time goes, per op: calls, host time inside the
//! call (validation, planning, launches) and GPU time between events recorded around it,
//! printed to stderr when the backend drops. Off, a scope costs one branch.
//!
//! Why: a decode step is a few hundred small launches; whether the host or the GPU sets its
//! pace decides what to optimize, and no system profiler runs on every machine.

use super::{Device, Event};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Default)]
pub struct Profile {
    on: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Recorded scopes whose GPU time is not read yet: (op, host time, start, end).
    pending: Vec<(&'static str, Duration, Event, Event)>,
    /// Per op: calls, host seconds, GPU milliseconds.
    totals: BTreeMap<&'static str, (u64, f64, f64)>,
    first: Option<Instant>,
    last: Option<Instant>,
}

/// One op's scope: ends (records its end event) when dropped.
pub struct Scope<'a> {
    prof: &'a Profile,
    dev: &'a Device,
    name: &'static str,
    start: Option<(Instant, Event)>,
}

impl Profile {
    pub fn from_env() -> Profile {
        Profile {
            on: std::env::var("FLEXKERN_CUDA_PROFILE").is_ok_and(|v| v == "1"),
            state: Mutex::default(),
        }
    }

    /// Whether this run is being profiled.
    pub fn on(&self) -> bool {
        self.on
    }

    pub fn scope<'a>(&'a self, dev: &'a Device, name: &'static str) -> Scope<'a> {
        let start = self.on.then(|| {
            let e = Event::new(dev).ok();
            if let Some(e) = &e {
                let _ = e.record(dev);
            }
            (Instant::now(), e)
        });
        Scope {
            prof: self,
            dev,
            name,
            start: start.and_then(|(t, e)| e.map(|e| (t, e))),
        }
    }

    /// Reads the GPU times recorded so far (waits for them).
    fn drain(st: &mut State) {
        for (name, host, a, b) in st.pending.drain(..) {
            let gpu = a.elapsed_ms(&b).unwrap_or(0.0) as f64;
            let t = st.totals.entry(name).or_default();
            *t = (t.0 + 1, t.1 + host.as_secs_f64(), t.2 + gpu);
        }
    }

    /// The table, or None when off or empty.
    pub fn report(&self) -> Option<String> {
        if !self.on {
            return None;
        }
        let mut st = self.state.lock().ok()?;
        Self::drain(&mut st);
        let span = st.last?.duration_since(st.first?).as_secs_f64();
        let (mut host, mut gpu) = (0.0, 0.0);
        let mut out = format!(
            "flexkern CUDA profile: {:<16} {:>8} {:>12} {:>12} {:>10} {:>10}\n",
            "op", "calls", "host us/call", "gpu us/call", "host ms", "gpu ms"
        );
        for (name, &(n, h, g)) in &st.totals {
            host += h;
            gpu += g / 1e3;
            out += &format!(
                "flexkern CUDA profile: {name:<16} {n:>8} {:>12.2} {:>12.2} {:>10.2} {:>10.2}\n",
                h * 1e6 / n as f64,
                g * 1e3 / n as f64,
                h * 1e3,
                g
            );
        }
        out += &format!(
            "flexkern CUDA profile: {:.1} ms from the first op to the last; inside ops: host {:.1} ms, gpu {:.1} ms\n",
            span * 1e3,
            host * 1e3,
            gpu * 1e3
        );
        Some(out)
    }
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        let Some((t, a)) = self.start.take() else {
            return;
        };
        let host = t.elapsed();
        let Ok(b) = Event::new(self.dev) else {
            return;
        };
        let _ = b.record(self.dev);
        let Ok(mut st) = self.prof.state.lock() else {
            return;
        };
        let now = Instant::now();
        st.first.get_or_insert(t);
        st.last = Some(now);
        st.pending.push((self.name, host, a, b));
        // Bounded memory: reading events waits for the GPU, so only every few thousand ops.
        if st.pending.len() >= 4096 {
            Profile::drain(&mut st);
        }
    }
}
