"""flexkern vs llama.cpp on one GGUF model, same threads, one run.

Checks: greedy continuations (first 32 tokens identical), last-position logits (max abs
difference, top-5 agreement), tokenization of a varied text token for token, and speed
(prefill tok/s on a ~193-token prompt, decode tok/s), medians over repeats, as one table.
The llama.cpp side is bench/llamacpp_probe.c; run through bench/llamacpp_compare.sh, which
builds it once and builds flexkern.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Once upon a time, in a small village by the sea,",
    "The three primary colors are",
    "Water boils at a temperature of",
]

VARIED_TEXT = (
    "Hello, world! Ünïcödé: naïve café, 日本語のテキスト, emoji 🚀🔥, Ελληνικά, русский.\n"
    "Numbers: 3.14159, 1,234,567, -42, 0x1F, 1e-10, 2026-11-22.\n"
    "Code: for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // tabs\tand  spaces\n"
    "    def f(x): return x**2 if x > 0 else -x  # comment\n"
    "Mixed CaSe, apostrophes: don't, it's, we'll; URLs: https://example.com/a?b=c&d=e."
)

SPEED_PARAGRAPH = (
    "Large language models generate text one token at a time. Before the first new token, "
    "the whole prompt is processed in a single batched pass called prefill, which is bound by "
    "arithmetic; every later token needs one pass over all the weights, which is bound by "
    "memory bandwidth. Quantized weights shrink that traffic: four-bit blocks with a scale and "
    "a minimum cut the model to a fraction of its original size while keeping most of its "
    "accuracy. A key-value cache keeps the attention keys and values of earlier positions so "
    "that they are never recomputed. "
)


def run_json(cmd):
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def flex(a, model, text, *extra):
    """Runs `flexkern run` on `text` (through a file, so any bytes survive)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    try:
        return run_json([a.flexkern, "run", "--model", model, "--threads", str(a.threads),
                         "--prompt-file", f.name, *extra])
    finally:
        os.unlink(f.name)


def llama(a, model, text, mode, *extra):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    try:
        return run_json([a.probe, model, str(a.threads), mode, f.name, *extra])
    finally:
        os.unlink(f.name)


def top_gap(logits):
    """Logit of the best token minus the runner-up's: how near a tie the greedy pick is."""
    two = np.sort(logits)[-2:]
    return float(two[1] - two[0])


def split_gaps(a, model, d, prompt, out, ref, match):
    """Both engines' top-1 gaps at the step where their greedy continuations split, found by
    re-running the prompt plus the shared continuation (when it re-tokenizes to the same ids).
    A gap smaller than the logit differences above means the split is a near-tie."""
    text = prompt + "".join(out["pieces"][:match])
    theirs_f32, ours_npy = os.path.join(d, "t2.f32"), os.path.join(d, "o2.npy")
    r = llama(a, model, text, "run", "2", theirs_f32)  # n = 1 would print a 0/0 speed
    if r["prompt_ids"] != ref["prompt_ids"] + ref["ids"][:match]:
        return "n/a (retokenizes)"
    flex(a, model, text, "--json", "--temperature", "0", "-n", "1", "--dump-logits", ours_npy)
    return f"{top_gap(np.fromfile(theirs_f32, dtype=np.float32)):.3f} / " \
           f"{top_gap(np.load(ours_npy)):.3f}"


def speed_prompt(a, model, target=193):
    text = SPEED_PARAGRAPH
    while len(flex(a, model, text, "--tokenize-only")) < target:
        text += SPEED_PARAGRAPH
    # Trim word by word down to the target length.
    words = text.split(" ")
    while len(flex(a, model, " ".join(words), "--tokenize-only")) > target:
        words.pop()
    return " ".join(words)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flexkern", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--decode-tokens", type=int, default=64)
    a = ap.parse_args()
    model = a.model or subprocess.run(
        [os.path.join(os.path.dirname(os.path.abspath(__file__)), "fetch_model.sh")],
        check=True, capture_output=True, text=True).stdout.strip()
    fails = 0

    print("== tokenization (varied text) ==")
    ref = llama(a, model, VARIED_TEXT, "tokenize")["ids"]
    got = flex(a, model, VARIED_TEXT, "--tokenize-only")
    same = ref == got
    fails += not same
    first = next((i for i, (x, y) in enumerate(zip(ref, got)) if x != y), None)
    print(f"llama.cpp {len(ref)} tokens, flexkern {len(got)} tokens: "
          f"{'identical' if same else f'DIFFER (first at {first})'}")

    print("\n== greedy 32 tokens and last-position logits ==")
    print(f"{'prompt':34} {'greedy':>8} {'max|dlogit|':>12} {'rms':>7} {'top5':>5} {'top1':>5} "
          f"{'split gap llama/ours':>21}")
    with tempfile.TemporaryDirectory() as d:
        for p in PROMPTS:
            ours_npy, theirs_f32 = os.path.join(d, "o.npy"), os.path.join(d, "t.f32")
            out = flex(a, model, p, "--json", "--temperature", "0", "-n", "32",
                       "--dump-logits", ours_npy)
            ref = llama(a, model, p, "run", "32", theirs_f32)
            ours, theirs = np.load(ours_npy), np.fromfile(theirs_f32, dtype=np.float32)
            if out["prompt_ids"] != ref["prompt_ids"]:
                print(f"  prompt tokenization differs: {out['prompt_ids']} vs {ref['prompt_ids']}")
            match = next((i for i, (x, y) in enumerate(zip(ref["ids"], out["ids"])) if x != y), 32)
            diff = float(np.max(np.abs(ours - theirs)))
            rms = float(np.sqrt(np.mean((ours - theirs) ** 2)))
            t5o, t5t = np.argsort(-ours)[:5], np.argsort(-theirs)[:5]
            top5 = len(set(t5o.tolist()) & set(t5t.tolist()))
            fails += match < 32
            gap = split_gaps(a, model, d, p, out, ref, match) if match < 32 else "-"
            print(f"{p[:32]!r:34} {match:>5}/32 {diff:12.4f} {rms:7.4f} {top5:>3}/5 "
                  f"{'yes' if t5o[0] == t5t[0] else 'NO':>5} {gap:>21}")

        print(f"\n== speed ({a.threads} threads, median of {a.repeats}, alternating) ==")
        text = speed_prompt(a, model)
        n = str(a.decode_tokens + 1)
        fk_p, fk_d, lc_p, lc_d = [], [], [], []
        for _ in range(a.repeats):
            o = flex(a, model, text, "--json", "--temperature", "0", "-n", n)
            fk_p.append(o["prefill_tok_s"])
            fk_d.append(o["decode_tok_s"])
            r = llama(a, model, text, "run", n, os.path.join(d, "t.f32"))
            lc_p.append(r["prefill_tok_s"])
            lc_d.append(r["decode_tok_s"])
    med = statistics.median
    print(f"prompt {o['prefill_tokens']} tokens (llama.cpp {r['prefill_tokens']}), "
          f"{o['decode_tokens']} decode steps")
    print(f"{'':12} {'prefill tok/s':>14} {'decode tok/s':>13}")
    print(f"{'llama.cpp':12} {med(lc_p):14.1f} {med(lc_d):13.1f}")
    print(f"{'flexkern':12} {med(fk_p):14.1f} {med(fk_d):13.1f}")
    print(f"{'ratio':12} {med(fk_p) / med(lc_p):14.2f} {med(fk_d) / med(lc_d):13.2f}")
    fmt = lambda xs: "[" + ", ".join(f"{x:.1f}" for x in xs) + "]"
    print(f"runs: flexkern prefill {fmt(fk_p)} decode {fmt(fk_d)}; "
          f"llama.cpp prefill {fmt(lc_p)} decode {fmt(lc_d)}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
