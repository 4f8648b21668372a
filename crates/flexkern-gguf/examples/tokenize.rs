//! Prints token ids for each text in a file, one line per text, for the tokenizer cross-check.
//! Texts are separated by lines holding only `\x1e` (ASCII record separator).
//! Usage: tokenize MODEL.gguf TEXTS.txt

use flexkern_gguf::{GgufFile, Tokenizer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, texts] = &args[..] else {
        return Err("usage: tokenize MODEL.gguf TEXTS.txt".into());
    };
    let f = GgufFile::open(model)?;
    let tok = Tokenizer::from_gguf(&f)?;
    let all = std::fs::read_to_string(texts)?;
    for text in all.split("\n\x1e\n") {
        let ids = tok.encode(text, false, true);
        let strs: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!("{}", strs.join(" "));
        if tok.decode(&ids) != text {
            eprintln!("round-trip mismatch for {text:?}");
        }
    }
    Ok(())
}
