//! Chat templates (`tokenizer.chat_template`) rendered with minijinja plus the helpers HF
//! templates expect (`raise_exception`, `strftime_now`, Python string methods, bos/eos tokens).

use minijinja::{context, Environment, Error as JinjaError, ErrorKind};

use crate::error::{GgufError, Result};
use crate::reader::GgufFile;

pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// A compiled-on-demand chat template with the vocab's BOS/EOS texts.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    source: String,
    bos_token: String,
    eos_token: String,
}

/// Instructions one render may run: real templates over long conversations use a few
/// thousand per message; a template with nested `range(100000)` loops ran for minutes.
pub const TEMPLATE_FUEL: u64 = 10_000_000;

/// Bytes one render may produce (a prompt far beyond any context window).
pub const TEMPLATE_MAX_OUTPUT: usize = 16 << 20;

/// A writer that refuses to grow past `TEMPLATE_MAX_OUTPUT`.
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + b.len() > TEMPLATE_MAX_OUTPUT {
            return Err(std::io::Error::other("output too large"));
        }
        self.0.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn env() -> Environment<'static> {
    let mut env = Environment::new();
    // Bad templates are input too: bounded work, never a hang.
    env.set_fuel(Some(TEMPLATE_FUEL));
    // HF renders with trim_blocks and lstrip_blocks on.
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |msg: String| -> std::result::Result<String, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
        },
    );
    env.add_function("strftime_now", |fmt: String| strftime_now(&fmt));
    env
}

fn jinja_err(e: JinjaError) -> GgufError {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    GgufError::ChatTemplate(msg)
}

impl ChatTemplate {
    /// Compiles `source` once to report syntax errors early.
    pub fn new(
        source: impl Into<String>,
        bos_token: impl Into<String>,
        eos_token: impl Into<String>,
    ) -> Result<Self> {
        let source = source.into();
        env().template_from_str(&source).map_err(jinja_err)?;
        Ok(Self {
            source,
            bos_token: bos_token.into(),
            eos_token: eos_token.into(),
        })
    }

    /// The file's template, or `None` when it carries none.
    pub fn from_gguf(f: &GgufFile) -> Result<Option<Self>> {
        let Some(src) = f.get_opt(CHAT_TEMPLATE_KEY, GgufFile::get_str)? else {
            return Ok(None);
        };
        let text = |key: &str| -> Result<String> {
            let id = f.get_opt(key, GgufFile::get_usize)?;
            let tokens = f.get_opt("tokenizer.ggml.tokens", GgufFile::get_str_array)?;
            Ok(id
                .and_then(|i| tokens.and_then(|t| t.get(i).map(|s| s.to_string())))
                .unwrap_or_default())
        };
        let bos = text("tokenizer.ggml.bos_token_id")?;
        let eos = text("tokenizer.ggml.eos_token_id")?;
        Self::new(src, bos, eos).map(Some)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `messages` as (role, content) pairs; `add_generation_prompt` opens the
    /// assistant turn.
    pub fn apply<R: AsRef<str>, C: AsRef<str>>(
        &self,
        messages: &[(R, C)],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let msgs: Vec<_> = messages
            .iter()
            .map(|(r, c)| context! { role => r.as_ref(), content => c.as_ref() })
            .collect();
        let env = env();
        let tmpl = env.template_from_str(&self.source).map_err(jinja_err)?;
        let mut out = Capped(Vec::new());
        let ctx = context! {
            messages => msgs,
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
        };
        match tmpl.render_captured_to(ctx, &mut out) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::OutOfFuel => {
                return Err(GgufError::ChatTemplate(format!(
                    "{CHAT_TEMPLATE_KEY}: the template ran past its work limit of \
                     {TEMPLATE_FUEL} instructions"
                )))
            }
            Err(e) if e.kind() == ErrorKind::WriteFailure => {
                return Err(GgufError::ChatTemplate(format!(
                    "{CHAT_TEMPLATE_KEY}: the template wrote more than {TEMPLATE_MAX_OUTPUT} bytes"
                )))
            }
            Err(e) => return Err(jinja_err(e)),
        }
        String::from_utf8(out.0)
            .map_err(|_| GgufError::ChatTemplate("rendered text is not UTF-8".into()))
    }
}

/// `strftime_now` for the date formats chat templates use (%d %m %Y %b %B %%).
fn strftime_now(fmt: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let month = MONTHS[(m - 1) as usize];
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('Y') => out.push_str(&y.to_string()),
            Some('b') => out.push_str(&month[..3]),
            Some('B') => out.push_str(month),
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 to (year, month 1..=12, day), Howard Hinnant's civil calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOL: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

    #[test]
    fn smollm_template() {
        let t = ChatTemplate::new(SMOL, "<|im_start|>", "<|im_end|>").unwrap();
        let s = t.apply(&[("user", "Hi")], true).unwrap();
        assert_eq!(
            s,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn llama3_style_template_with_helpers() {
        let src = "{{ bos_token }}{% for m in messages %}{% if m['role'] not in ['user','assistant'] %}{{ raise_exception('bad role ' + m['role']) }}{% endif %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";
        let t = ChatTemplate::new(src, "<|begin_of_text|>", "<|eot_id|>").unwrap();
        let s = t.apply(&[("user", " hey ")], true).unwrap();
        assert_eq!(s, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhey<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
        let e = t.apply(&[("tool", "x")], false).unwrap_err();
        assert!(e.to_string().contains("bad role tool"), "{e}");
    }

    #[test]
    fn python_methods_and_dates() {
        let t = ChatTemplate::new(
            "{{ messages[0].content.strip().upper() }} {{ strftime_now('%Y') | length }}",
            "",
            "",
        )
        .unwrap();
        assert_eq!(t.apply(&[("user", "  a b ")], false).unwrap(), "A B 4");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
    }

    #[test]
    fn syntax_error_is_typed() {
        assert!(matches!(
            ChatTemplate::new("{% for %}", "", ""),
            Err(GgufError::ChatTemplate(_))
        ));
    }
    #[test]
    fn runaway_templates_hit_the_work_and_output_limits() {
        let t = std::time::Instant::now();
        let nested =
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        let e = ChatTemplate::new(nested, "", "")
            .unwrap()
            .apply(&[("user", "hi")], true);
        let msg = e.unwrap_err().to_string();
        assert!(
            msg.contains("work limit") && msg.contains(CHAT_TEMPLATE_KEY),
            "{msg}"
        );
        let big = "{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}";
        let e = ChatTemplate::new(big, "", "")
            .unwrap()
            .apply(&[("user", "hi")], true);
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains("more than"), "{msg}");
        assert!(t.elapsed().as_secs() < 30, "{:?}", t.elapsed());
    }

    #[test]
    fn from_gguf_handles_absent_and_mistyped_templates() {
        use crate::{GgufWriter, Value};
        let f = |w: &GgufWriter| GgufFile::from_bytes(w.to_bytes()).unwrap();
        let mut w = GgufWriter::new();
        assert!(ChatTemplate::from_gguf(&f(&w)).unwrap().is_none());
        w.add_metadata(CHAT_TEMPLATE_KEY, Value::U32(1)).unwrap();
        assert!(matches!(
            ChatTemplate::from_gguf(&f(&w)),
            Err(GgufError::WrongType { .. })
        ));
        w.add_metadata(
            CHAT_TEMPLATE_KEY,
            Value::String("{{ bos_token }}|{{ eos_token }}".into()),
        )
        .unwrap();
        w.add_metadata("tokenizer.ggml.tokens", Value::str_array(&["<s>", "</s>"]))
            .unwrap();
        w.add_metadata("tokenizer.ggml.bos_token_id", Value::U32(0))
            .unwrap();
        w.add_metadata("tokenizer.ggml.eos_token_id", Value::U32(7))
            .unwrap();
        let t = ChatTemplate::from_gguf(&f(&w)).unwrap().unwrap();
        // An out-of-range eos id renders as empty rather than failing the template.
        assert_eq!(t.apply::<&str, &str>(&[], false).unwrap(), "<s>|");
    }
}
