"""Decode-attention peers on the GPU, on the shapes of `flexkern bench attn --device cuda`:
PyTorch SDPA (flash and cuDNN backends, native GQA) and FlexAttention (compiled, GQA), beside
the device-to-device copy bandwidth measured in the same process (bytes read + written).
Adapted from the helper brief's torch_peers.py. Event-timed medians, on an idle GPU and queued
behind GPU work (the call's kernels alone, as flexkern's "queued" figure)."""
import sys, torch
from cuda_timing import copy_bandwidth, event_median, event_median_queued, read_bandwidth
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
from torch.nn.attention.flex_attention import flex_attention

dev = "cuda"
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
quick = "--quick" in sys.argv
reps = 5 if quick else 30

def bench(fn, iters=reps, warm=3):
    return event_median(fn, iters, warm)

copy = copy_bandwidth(reps)
read = read_bandwidth(reps)
print(f"copy bandwidth (device to device, read + write): {copy/1e9:.0f} GB/s; read bandwidth (torch.sum over 1 GiB, queued): {read/1e9:.0f} GB/s")
flex = torch.compile(flex_attention, dynamic=False)
div = 8 if quick else 1
shapes = [(64, 8192, 32, 8, 128), (8, 32768, 32, 8, 128), (1, 131072, 32, 8, 128), (64, 8192, 9, 3, 64)]
print(f"{'case':<44} {'peer':<12} {'median ms':>10} {'GB/s':>8} {'ratio':>7} {'queued ms':>10} {'ratio':>7} {'of read':>7}")
for (B, L, Hq, Hk, D) in shapes:
    L //= div
    q = torch.randn(B, Hq, 1, D, dtype=torch.bfloat16, device=dev)
    k = torch.randn(B, Hk, L, D, dtype=torch.bfloat16, device=dev); v = torch.randn_like(k)
    byts = 2 * k.numel() * 2
    name = f"decode B{B} L{L} Hq{Hq}/Hkv{Hk} D{D} bf16"
    runs = []
    for peer, be in [("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)]:
        def f(be=be):
            with sdpa_kernel([be]):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        runs.append((peer, f))
    runs.append(("flex", lambda: flex(q, k, v, enable_gqa=True)))
    for peer, f in runs:
        try:
            t = bench(f)
            tq = event_median_queued(f, reps)
            print(f"{name:<44} {peer:<12} {t*1e3:>10.3f} {byts/t/1e9:>8.0f} {byts/t/copy*100:>6.1f}% {tq*1e3:>10.3f} {byts/tq/copy*100:>6.1f}% {byts/tq/read*100:>6.1f}%")
        except Exception as ex:
            print(f"{name:<44} {peer:<12} n/a ({type(ex).__name__}: {str(ex)[:80]})")
    del q, k, v
