//! What the binary's tests share: running `flexkern` with a deadline (a signal or a hang fails
//! the test) and a scratch directory per test process.
#![allow(dead_code)] // each test file uses part of it

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary with no model cache in reach and `configure` applied to the command (env,
/// working directory); returns (exit code, stdout, stderr). A signal or a run past `deadline`
/// fails the test.
pub fn flexkern_with(
    args: &[&str],
    deadline: Duration,
    configure: impl FnOnce(&mut Command),
) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flexkern"));
    cmd.args(args)
        .env("FLEXKERN_CACHE", "/nonexistent")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    configure(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > deadline {
            let _ = child.kill();
            panic!("flexkern {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("flexkern {args:?} died by a signal: {:?}", out.status));
    let s = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (code, s(out.stdout), s(out.stderr))
}

/// [`flexkern_with`] with a 5-minute deadline and nothing else configured.
pub fn flexkern(args: &[&str]) -> (i32, String, String) {
    flexkern_with(args, Duration::from_secs(300), |_| {})
}

/// A fresh directory `flexkern-<name>-<pid>` under the system's temporary directory.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flexkern-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
