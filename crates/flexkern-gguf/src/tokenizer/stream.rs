//! Streaming detokenization: tokens can end mid-character, so hold bytes until UTF-8 completes.

use super::Tokenizer;

/// Buffers partial UTF-8 between tokens and yields only complete text.
#[derive(Debug, Default, Clone)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one token's bytes; returns the text that is now complete (maybe empty).
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> String {
        let piece = tok.token_to_piece(id);
        self.push_bytes(&piece)
    }

    /// Adds raw bytes; invalid sequences become U+FFFD, an unfinished tail stays buffered.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    // The prefix was just validated, so this conversion cannot fail.
                    out.push_str(std::str::from_utf8(&self.pending[..good]).unwrap_or_default());
                    match e.error_len() {
                        None => {
                            self.pending.drain(..good);
                            return out;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..good + bad);
                        }
                    }
                }
            }
        }
    }

    /// Flushes whatever is left (an unfinished character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_multibyte_chars() {
        let mut d = StreamDecoder::new();
        let e = "é🙂".as_bytes();
        assert_eq!(d.push_bytes(&e[..1]), "");
        assert_eq!(d.push_bytes(&e[1..3]), "é");
        assert_eq!(d.push_bytes(&e[3..5]), "");
        assert_eq!(d.push_bytes(&e[5..]), "🙂");
        assert_eq!(d.push_bytes(&[0xff, b'a']), "\u{FFFD}a");
        assert_eq!(d.push_bytes(&[0xe2]), "");
        assert_eq!(d.finish(), "\u{FFFD}");
    }
}
