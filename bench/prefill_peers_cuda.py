"""Prefill-attention peers on the GPU (issue 15): PyTorch SDPA (flash and cuDNN backends) and
compiled FlexAttention on the shapes and variants of `flexkern bench attn --device cuda --only
prefill`, beside the bf16 matmul rate measured in the same process (the limit the TFLOP/s are
rated against). Effective TFLOP/s count only the visible (query, key) pairs: 4 * D per pair.
Event-timed medians. Usage: python3 prefill_peers_cuda.py [--quick] [--d64 | --d128] (one head
size's shape only)"""
import math, sys, torch
from cuda_timing import event_median
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
from torch.nn.attention.flex_attention import flex_attention, create_block_mask

dev = "cuda"
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
quick = "--quick" in sys.argv
reps = 5 if quick else 20


def bench(fn):
    return event_median(fn, reps, 3)


a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
b = torch.randn_like(a)
peak = 2 * 8192**3 / bench(lambda: a @ b)
print(f"bf16 matmul 8192^3: {peak/1e12:.0f} TFLOP/s")
del a, b
# One compile per (shape, variant): the default limit of 8 would drop the later cases to the
# unfused fallback, which materializes the scores.
torch._dynamo.config.recompile_limit = 64
torch._dynamo.config.accumulated_recompile_limit = 1024
flex = torch.compile(flex_attention, dynamic=False)


def causal(b, h, q, k):
    return q >= k


def sliding(b, h, q, k):
    return (q >= k) & (q - k < 1024)


def softcap(s, b, h, q, k):
    return 30.0 * torch.tanh(s / 30.0)


def alibi_mod(H):
    slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / H) for i in range(H)], device=dev)
    return lambda s, b, h, q, k: s - slopes[h] * (q - k)


def document(S, docs=4):
    ids = (torch.arange(S, device=dev) * docs) // S  # equal documents, causal inside each
    return lambda b, h, q, k: (ids[q] == ids[k]) & (q >= k)


def pairs(S, kind):
    if kind == "full":
        return S * S
    if kind == "sliding":
        return sum(min(i + 1, 1024) for i in range(S))
    if kind == "document":
        n = S // 4
        return 4 * n * (n + 1) // 2
    return S * (S + 1) // 2


shapes = [(2, 16, 8192, 128), (4, 16, 4096, 64)]
if quick:
    shapes = [(1, 4, 1024, 128)]
only = [int(x[3:]) for x in sys.argv[1:] if x in ("--d64", "--d128")]
shapes = [s for s in shapes if not only or s[3] in only]
print(f"{'case':<52} {'peer':<11} {'median ms':>10} {'TFLOP/s':>8} {'of peak':>8}")
for (B, H, S, D) in shapes:
    q = torch.randn(B, H, S, D, dtype=torch.bfloat16, device=dev)
    k, v = torch.randn_like(q), torch.randn_like(q)
    cm = create_block_mask(causal, None, None, S, S, device=dev)
    cases = [
        ("causal", "causal", dict(block_mask=cm), True),
        ("non-causal", "full", dict(), False),
        ("sliding 1024", "sliding", dict(block_mask=create_block_mask(sliding, None, None, S, S, device=dev)), None),
        ("causal + softcap 30", "causal", dict(block_mask=cm, score_mod=softcap), None),
        ("causal + alibi", "causal", dict(block_mask=cm, score_mod=alibi_mod(H)), None),
        ("document (4 docs, causal)", "document", dict(block_mask=create_block_mask(document(S), None, None, S, S, device=dev)), None),
    ]
    for label, kind, kw, sdpa_causal in cases:
        name = f"prefill B{B} H{H} S{S} D{D} {label}"
        fl = 4 * B * H * D * pairs(S, kind)
        runs = [("flex", lambda kw=kw: flex(q, k, v, **kw))]
        if sdpa_causal is not None:
            for peer, be in [("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)]:
                def f(be=be, c=sdpa_causal):
                    with sdpa_kernel([be]):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=c)
                runs.append((peer, f))
        for peer, f in runs:
            try:
                t = bench(f)
                print(f"{name:<52} {peer:<11} {t*1e3:>10.3f} {fl/t/1e12:>8.0f} {fl/t/peak*100:>7.1f}%")
            except Exception as ex:
                print(f"{name:<52} {peer:<11} n/a ({type(ex).__name__}: {str(ex)[:80]})")
    del q, k, v

# Chunked prefill: 512 new queries (causal, offset) over a 32k cached prefix, H 16, D 128.
Lp, Sq, H, D = (4096, 128, 4, 128) if quick else (32768, 512, 16, 128)
q = torch.randn(1, H, Sq, D, dtype=torch.bfloat16, device=dev)
k = torch.randn(1, H, Lp + Sq, D, dtype=torch.bfloat16, device=dev)
v = torch.randn_like(k)
off = lambda b, h, qi, ki: qi + Lp >= ki
bm = create_block_mask(off, None, None, Sq, Lp + Sq, device=dev)
fl = 4 * H * D * sum(Lp + i + 1 for i in range(Sq))
name = f"chunked prefill {Sq} on {Lp} prefix H{H} D{D}"
t = bench(lambda: flex(q, k, v, block_mask=bm))
print(f"{name:<52} {'flex':<11} {t*1e3:>10.3f} {fl/t/1e12:>8.0f} {fl/t/peak*100:>7.1f}%")
