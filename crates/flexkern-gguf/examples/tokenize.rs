//! Cross-check helper. Texts in TEXTS.txt are separated by lines holding only `\x1e`.
//!   tokenize MODEL.gguf TEXTS.txt   -> token ids of each text, one line per text
//!   tokenize --split PRE TEXTS.txt  -> byte lengths of the pre-tokenizer pieces for `PRE`

use flexkern_gguf::tokenizer::pretokenize::PreTokenizer;
use flexkern_gguf::{GgufFile, Tokenizer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let line = |v: Vec<usize>| v.iter().map(usize::to_string).collect::<Vec<_>>().join(" ");
    match &args[1..] {
        [flag, pre, texts] if flag == "--split" => {
            let p = PreTokenizer::from_name(pre)?;
            for text in std::fs::read_to_string(texts)?.split("\n\x1e\n") {
                println!("{}", line(p.split(text).iter().map(|s| s.len()).collect()));
            }
        }
        [model, texts] => {
            let tok = Tokenizer::from_gguf(&GgufFile::open(model)?)?;
            for text in std::fs::read_to_string(texts)?.split("\n\x1e\n") {
                let ids = tok.encode(text, false, true);
                println!("{}", line(ids.iter().map(|&i| i as usize).collect()));
                if tok.decode(&ids) != text {
                    eprintln!("round-trip mismatch for {text:?}");
                }
            }
        }
        _ => {
            return Err(
                "usage: tokenize MODEL.gguf TEXTS.txt | tokenize --split PRE TEXTS.txt".into(),
            )
        }
    }
    Ok(())
}
