"""PyTorch peer of `flexkern run --device cuda` on a synthetic model (bench/model_cuda.sh):
a bf16 llama-family decoder of the same shape as `flexkern synth-model --shape S` (random
weights, plain PyTorch, no `transformers`), gpt-fast's recipe: a static KV cache in module
buffers, fused QKV and gate/up weights, greedy argmax on the device, and the one-token decode
step through torch.compile(mode="reduce-overhead") (CUDA graphs). Batch 1. Reports decode
tokens/s (median of --runs timed generations after --warmup untimed ones) beside the
device-to-device copy bandwidth measured in the same process (bytes read + written), and the
bandwidth bound (weight + KV bytes read per token over that copy bandwidth).

Usage: python3 bench/model_peers_cuda.py --shape smollm2-135m [--tokens 128] [--prompt-len 30]
       [--vocab 49152] [--runs 5] [--warmup 2] [--device cuda|cpu] [--no-compile]
`--device cpu --no-compile` runs the same model code on the CPU (a smoke test, not a number).
"""
import argparse
import math
import statistics
import time

import torch
from cuda_timing import copy_bandwidth
import torch.nn as nn
import torch.nn.functional as F

# flexkern-model's synth::SHAPES (each model's config.json): layers, d, ff, heads, kv heads,
# rope base, Llama 3 rope scaling (factor, low, high, original context), tied embeddings.
SHAPES = {
    "llama3-8b": (32, 4096, 14336, 32, 8, 500000.0, (8.0, 1.0, 4.0, 8192), False),
    "llama3-1b": (16, 2048, 8192, 32, 8, 500000.0, (32.0, 1.0, 4.0, 8192), True),
    "smollm2-135m": (30, 576, 1536, 9, 3, 100000.0, None, True),
}
RMS_EPS = 1e-5


def inv_freq(head_dim, base, llama3):
    f = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    if llama3 is None:
        return f
    factor, low, high, orig = llama3
    wavelen = 2 * math.pi / f
    scaled = torch.where(wavelen > orig / low, f / factor, f)
    smooth = (orig / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= orig / high) & (wavelen <= orig / low)
    return torch.where(medium, smoothed, scaled)


def rms_norm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)).type_as(x) * w


def rope(x, cos, sin):
    """Neox-style rotation of x [1, T, heads, hd] by the angles of its positions."""
    x1, x2 = x.float().chunk(2, dim=-1)
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).type_as(x)


class Layer(nn.Module):
    def __init__(self, d, ff, heads, kv_heads, max_len, dtype, device):
        super().__init__()
        hd = d // heads
        self.heads, self.kv_heads, self.hd = heads, kv_heads, hd

        def w(*shape):
            return nn.Parameter(torch.randn(*shape, dtype=dtype, device=device) * 0.02,
                                requires_grad=False)

        self.attn_norm = nn.Parameter(torch.ones(d, dtype=dtype, device=device), requires_grad=False)
        self.ffn_norm = nn.Parameter(torch.ones(d, dtype=dtype, device=device), requires_grad=False)
        self.wqkv = w((heads + 2 * kv_heads) * hd, d)
        self.wo = w(d, heads * hd)
        self.w13 = w(2 * ff, d)
        self.w2 = w(d, ff)
        cache = (1, kv_heads, max_len, hd)
        self.register_buffer("k_cache", torch.zeros(cache, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(cache, dtype=dtype, device=device))
        # Fixed addresses, mutated in place: CUDA graphs keep them as static inputs (what
        # transformers' StaticCache does) rather than skipping the graph for mutated inputs.
        torch._dynamo.mark_static_address(self.k_cache)
        torch._dynamo.mark_static_address(self.v_cache)

    def forward(self, x, pos, cos, sin, mask):
        t, (h, kvh, hd) = x.shape[1], (self.heads, self.kv_heads, self.hd)
        qkv = F.linear(rms_norm(x, self.attn_norm), self.wqkv)
        q, k, v = qkv.split([h * hd, kvh * hd, kvh * hd], dim=-1)
        q = rope(q.view(1, t, h, hd), cos, sin).transpose(1, 2)
        k = rope(k.view(1, t, kvh, hd), cos, sin).transpose(1, 2)
        v = v.view(1, t, kvh, hd).transpose(1, 2)
        self.k_cache[:, :, pos] = k
        self.v_cache[:, :, pos] = v
        kk = self.k_cache.repeat_interleave(h // kvh, dim=1)
        vv = self.v_cache.repeat_interleave(h // kvh, dim=1)
        y = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
        x = x + F.linear(y.transpose(1, 2).reshape(1, t, h * hd), self.wo)
        g, u = F.linear(rms_norm(x, self.ffn_norm), self.w13).chunk(2, dim=-1)
        return x + F.linear(F.silu(g) * u, self.w2)


class Model(nn.Module):
    def __init__(self, shape, vocab, max_len, dtype, device):
        super().__init__()
        n_layer, d, ff, heads, kv_heads, base, llama3, tied = SHAPES[shape]
        self.embed = nn.Parameter(torch.randn(vocab, d, dtype=dtype, device=device) * 0.02,
                                  requires_grad=False)
        self.layers = nn.ModuleList(
            Layer(d, ff, heads, kv_heads, max_len, dtype, device) for _ in range(n_layer))
        self.norm = nn.Parameter(torch.ones(d, dtype=dtype, device=device), requires_grad=False)
        self.lm_head = self.embed if tied else nn.Parameter(
            torch.randn(vocab, d, dtype=dtype, device=device) * 0.02, requires_grad=False)
        ang = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq(d // heads, base, llama3))
        self.register_buffer("cos", ang.cos().float().to(device))
        self.register_buffer("sin", ang.sin().float().to(device))
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool, device=device)))

    def forward(self, idx, pos):
        """Logits of the last of `idx` [1, T] at positions `pos` [T]; appends their K/V."""
        x = F.embedding(idx, self.embed)
        cos, sin, mask = self.cos[pos], self.sin[pos], self.causal[None, None, pos]
        for layer in self.layers:
            x = layer(x, pos, cos, sin, mask)
        return F.linear(rms_norm(x[:, -1], self.norm), self.lm_head)

    def weight_bytes(self):
        """Bytes a decode step reads from weight matrices (the embedding is one row)."""
        mats = [self.lm_head] + [p for l in self.layers for p in (l.wqkv, l.wo, l.w13, l.w2)]
        return sum(p.numel() * p.element_size() for p in mats)

    def kv_bytes(self, positions):
        l = self.layers[0]
        return len(self.layers) * 2 * l.kv_heads * l.hd * positions * self.embed.element_size()


def decode_one(model, tok, pos):
    logits = model(tok, pos)
    return torch.argmax(logits, dim=-1, keepdim=True)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def generate(model, step, prompt, n, device):
    """Greedy: eager prefill, then `n - 1` compiled decode steps; returns (tokens, decode s)."""
    pos = torch.arange(prompt.shape[1], device=device)
    tok = decode_one(model, prompt, pos)
    out = [tok]
    sync(device)
    t0 = time.perf_counter()
    p = torch.tensor([prompt.shape[1]], device=device)
    for _ in range(n - 1):
        tok = step(model, tok, p).clone()
        out.append(tok)
        p += 1
    sync(device)
    return torch.cat(out, dim=1), time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompt-len", type=int, default=30)
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    if a.tokens < 2 or a.prompt_len < 1 or a.runs < 1 or a.warmup < 0:
        ap.error("--tokens >= 2, --prompt-len >= 1, --runs >= 1, --warmup >= 0")
    dev = a.device
    torch.manual_seed(0)
    name = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"
    print(f"torch {torch.__version__} cuda {torch.version.cuda} {name}")
    copy = copy_bandwidth(20, dev) if dev == "cuda" else float("nan")
    print(f"copy bandwidth (device to device, read + write): {copy / 1e9:.0f} GB/s")
    max_len = a.prompt_len + a.tokens
    with torch.no_grad():
        model = Model(a.shape, a.vocab, max_len, torch.bfloat16, dev).eval()
        step = decode_one if a.no_compile else torch.compile(
            decode_one, mode="reduce-overhead", fullgraph=True)
        prompt = torch.randint(0, a.vocab, (1, a.prompt_len), device=dev)
        secs, first = [], None
        for r in range(a.warmup + a.runs):
            toks, s = generate(model, step, prompt, a.tokens, dev)
            first = toks if first is None else first
            if r >= a.warmup:
                secs.append(s)
            # The same tokens every run: CUDA-graph replay changes no result.
            if not torch.equal(toks, first):
                print(f"note: run {r} generated other tokens than run 0")
    tok_s = (a.tokens - 1) / statistics.median(secs)
    wb = model.weight_bytes()
    per_tok = wb + model.kv_bytes(a.prompt_len + a.tokens // 2)
    bound = copy / per_tok
    runs = " ".join(f"{(a.tokens - 1) / s:.1f}" for s in secs)
    mode = "eager" if a.no_compile else "torch.compile reduce-overhead (CUDA graphs)"
    print(f"pytorch bf16 {a.shape} vocab {a.vocab}: {mode}, static KV cache, batch 1, "
          f"prompt {a.prompt_len} + {a.tokens} tokens")
    print(f"decode: {a.tokens - 1} tokens, {tok_s:.1f} tok/s (median of {a.runs}: {runs}) | "
          f"weights {wb / 1e9:.3f} GB | {per_tok * tok_s / 1e9:.0f} GB/s read = "
          f"{100 * tok_s / bound:.1f}% of the copy bound ({bound:.0f} tok/s)")


if __name__ == "__main__":
    main()
