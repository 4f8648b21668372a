"""PyTorch peers for `flexkern bench attn` on the CPU: SDPA and compiled FlexAttention on the
issue's shapes (f32 causal prefill S4096 H8 D128, decode 32k KV Hq32/Hkv8, sliding window 256,
BlockMask construction). Prints one CSV line per case: case,median_ms,rate,unit."""
import math, sys, time
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention, create_block_mask

torch.manual_seed(0)
quick = "--quick" in sys.argv
S = 1024 if quick else 4096
KV = 4096 if quick else 32768
REPS = 1 if quick else 5
print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}", flush=True)

def median(fn, reps=REPS, warm=1):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2]

def row(case, t, rate, unit):
    print(f"{case},{t*1e3:.3f},{rate:.3f},{unit}", flush=True)

H, D = 8, 128
q = torch.randn(1, H, S, D); k = torch.randn(1, H, S, D); v = torch.randn(1, H, S, D)
flops = 4 * S * S * D * H / 2
t = median(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
row(f"torch sdpa prefill f32 causal S{S} H{H} D{D}", t, flops / t / 1e9, "GFLOP/s")

flex = torch.compile(flex_attention, dynamic=False)
causal = lambda b, h, qi, ki: qi >= ki
tb = median(lambda: create_block_mask(causal, None, None, S, S, device="cpu"), reps=3)
bm = create_block_mask(causal, None, None, S, S, device="cpu")
t = median(lambda: flex(q, k, v, block_mask=bm))
row(f"torch flex prefill f32 causal S{S} H{H} D{D}", t, flops / t / 1e9, "GFLOP/s")
row(f"torch flex create_block_mask causal S{S}", tb, tb / t * 100, "% of attn")

W = 256
sw = lambda b, h, qi, ki: (qi >= ki) & (qi - ki < W)
bms = create_block_mask(sw, None, None, S, S, device="cpu")
t = median(lambda: flex(q, k, v, block_mask=bms))
row(f"torch flex sliding {W}+causal S{S}", t, 0.0, "ms only")

Hq, Hkv = 32, 8
qd = torch.randn(1, Hq, 1, D); kd = torch.randn(1, Hkv, KV, D); vd = torch.randn(1, Hkv, KV, D)
nbytes = 2 * KV * Hkv * D * 4
t = median(lambda: F.scaled_dot_product_attention(qd, kd, vd, enable_gqa=True), reps=REPS * 4)
row(f"torch sdpa decode f32 KV{KV} Hq{Hq}/Hkv{Hkv}", t, nbytes / t / 1e9, "GB/s")
t = median(lambda: flex(qd, kd, vd, enable_gqa=True), reps=REPS * 4)
row(f"torch flex decode f32 KV{KV} Hq{Hq}/Hkv{Hkv}", t, nbytes / t / 1e9, "GB/s")
