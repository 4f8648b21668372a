"""flexkern vs llama.cpp (through llama-cpp-python) on one GGUF model, same threads.

Checks: greedy continuations (first 32 tokens identical), last-position logits (max abs
difference, top-5 agreement), tokenization of a varied text token for token, and speed
(prefill tok/s on a ~193-token prompt, decode tok/s), medians over repeats, as one table.
Run through bench/llamacpp_compare.sh, which builds llama.cpp once and builds flexkern.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import llama_cpp

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


def speed_prompt(llm, target=193):
    text = SPEED_PARAGRAPH
    while len(llm.tokenize(text.encode(), add_bos=False, special=False)) < target:
        text += SPEED_PARAGRAPH
    ids = llm.tokenize(text.encode(), add_bos=False, special=False)[:target]
    return llm.detokenize(ids).decode("utf-8", errors="ignore")


def flex(binary, model, threads, text, *extra):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        cmd = [binary, "run", "--threads", str(threads), "--prompt-file", path, *extra]
        if model:
            cmd += ["--model", model]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return out
    finally:
        os.unlink(path)


def last_logits(llm):
    n_vocab = llm.n_vocab()
    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,)).copy()


def llama_greedy(llm, ids, n):
    llm.reset()
    llm.eval(ids)
    out = []
    for _ in range(n):
        tok = int(np.argmax(last_logits(llm)))
        out.append(tok)
        llm.eval([tok])
    return out


def llama_speed(llm, ids, n_decode):
    """(prefill tok/s, decode tok/s) from llama.cpp's own performance counters."""
    llm.reset()
    llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
    llm.eval(ids)
    tok = int(np.argmax(last_logits(llm)))
    for _ in range(n_decode):
        llm.eval([tok])
        tok = int(np.argmax(last_logits(llm)))
    p = llama_cpp.llama_perf_context(llm._ctx.ctx)
    return p.n_p_eval / (p.t_p_eval_ms / 1e3), p.n_eval / (p.t_eval_ms / 1e3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flexkern", required=True)
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--decode-tokens", type=int, default=64)
    a = ap.parse_args()
    model = a.model or subprocess.run(
        [os.path.join(os.path.dirname(__file__), "fetch_model.sh")],
        check=True, capture_output=True, text=True).stdout.strip()
    llm = llama_cpp.Llama(model_path=model, n_ctx=1024, n_batch=512, n_ubatch=512,
                          n_threads=a.threads, n_threads_batch=a.threads, verbose=False)
    fails = 0

    print("== tokenization (varied text) ==")
    ref = llm.tokenize(VARIED_TEXT.encode(), add_bos=False, special=False)
    got = json.loads(flex(a.flexkern, model, a.threads, VARIED_TEXT, "--tokenize-only"))
    same = ref == got
    fails += not same
    first = next((i for i, (x, y) in enumerate(zip(ref, got)) if x != y), None)
    print(f"llama.cpp {len(ref)} tokens, flexkern {len(got)} tokens: "
          f"{'identical' if same else f'DIFFER (first at {first})'}")

    print("\n== greedy 32 tokens and last-position logits ==")
    print(f"{'prompt':34} {'greedy':>10} {'max|dlogit|':>12} {'top5':>6} {'top1':>5}")
    for p in PROMPTS:
        ids = llm.tokenize(p.encode(), add_bos=llm._model.add_bos_token(), special=False)
        with tempfile.TemporaryDirectory() as d:
            npy = os.path.join(d, "l.npy")
            out = json.loads(flex(a.flexkern, model, a.threads, p, "--json", "--temperature",
                                  "0", "-n", "32", "--dump-logits", npy))
            ours = np.load(npy)
        if out["prompt_ids"] != ids:
            print(f"  prompt tokenization differs: {out['prompt_ids']} vs {ids}")
        llm.reset()
        llm.eval(ids)
        theirs = last_logits(llm)
        ref = llama_greedy(llm, ids, 32)
        match = next((i for i, (x, y) in enumerate(zip(ref, out["ids"])) if x != y), 32)
        diff = float(np.max(np.abs(ours - theirs)))
        t5o, t5t = np.argsort(-ours)[:5], np.argsort(-theirs)[:5]
        top5 = len(set(t5o) & set(t5t))
        fails += match < 32
        print(f"{p[:32]!r:34} {match:>7}/32 {diff:12.4f} {top5:>4}/5 "
              f"{'yes' if t5o[0] == t5t[0] else 'NO':>5}")

    print(f"\n== speed ({a.threads} threads, median of {a.repeats}) ==")
    text = speed_prompt(llm)
    ids = llm.tokenize(text.encode(), add_bos=llm._model.add_bos_token(), special=False)
    fk_p, fk_d, lc_p, lc_d = [], [], [], []
    for _ in range(a.repeats):
        o = json.loads(flex(a.flexkern, model, a.threads, text, "--json", "--temperature", "0",
                            "-n", str(a.decode_tokens + 1)))
        fk_p.append(o["prefill_tok_s"])
        fk_d.append(o["decode_tok_s"])
        p, d = llama_speed(llm, ids, a.decode_tokens)
        lc_p.append(p)
        lc_d.append(d)
    med = statistics.median
    print(f"prompt {len(ids)} tokens, {a.decode_tokens} decode steps")
    print(f"{'':12} {'prefill tok/s':>14} {'decode tok/s':>13}")
    print(f"{'llama.cpp':12} {med(lc_p):14.1f} {med(lc_d):13.1f}")
    print(f"{'flexkern':12} {med(fk_p):14.1f} {med(fk_d):13.1f}")
    print(f"{'ratio':12} {med(fk_p) / med(lc_p):14.2f} {med(fk_d) / med(lc_d):13.2f}")
    print(f"runs: flexkern prefill {fk_p} decode {fk_d}; llama.cpp prefill {lc_p} decode {lc_d}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
