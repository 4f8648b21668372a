//! Any text as a chat template (split at the first NUL: template, then a message), rendered
//! under the renderer's work and output limits.
#![no_main]

use flexkern_gguf::ChatTemplate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let (src, msg) = s.split_once('\0').unwrap_or((s, "hello"));
    if let Ok(t) = ChatTemplate::new(src, "<s>", "</s>") {
        let _ = t.apply(&[("system", "be brief"), ("user", msg)], true);
    }
});
