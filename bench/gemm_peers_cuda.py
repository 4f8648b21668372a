"""Prompt-GEMM peers on the GPU, on the shapes of `flexkern bench gemv --device cuda --m M`
(Llama-3-8B's matrices, N x K = 14336 x 4096, 4096 x 4096 and 4096 x 14336): cuBLAS f16
through F.linear (Y = X W^T, X [M, K] f16), beside the card's dense f16 tensor-core rate
measured in the same process (an 8192^3 matmul: the hardware limit the GEMM is a ratio of).
Weight copies cycled so they overflow the L2 cache, as flexkern's benchmark does.
Event-timed medians. Usage: gemm_peers_cuda.py [--m 512] [--quick]"""
import sys, torch
from cuda_timing import event_median
import torch.nn.functional as F

dev = "cuda"
args = sys.argv[1:]
m = int(args[args.index("--m") + 1]) if "--m" in args else 512
reps = 5 if "--quick" in args else 30
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))

a = torch.randn(8192, 8192, dtype=torch.float16, device=dev)
b = torch.randn(8192, 8192, dtype=torch.float16, device=dev)
t = event_median(lambda: a @ b, reps, 3)
peak = 2 * 8192**3 / t / 1e12
print(f"dense f16 matmul 8192^3 (cuBLAS): {peak:.0f} TFLOP/s")
del a, b

l2 = torch.cuda.get_device_properties(0).L2_cache_size
print(f"{'peer':<12} {'M':>5} {'N':>6} {'K':>6} {'us/call':>10} {'TFLOP/s':>8} {'of peak':>8}")
for (N, K) in [(14336, 4096), (4096, 4096), (4096, 14336)]:
    byts = N * K * 2
    copies = max(2, min(64, -(-4 * l2 // byts)))
    ws = [torch.randn(N, K, dtype=torch.float16, device=dev) for _ in range(copies)]
    x = torch.randn(m, K, dtype=torch.float16, device=dev)
    t = event_median(lambda: [F.linear(x, w) for w in ws], reps, 3) / copies
    tf = 2 * m * N * K / t / 1e12
    print(f"{'F.linear':<12} {m:>5} {N:>6} {K:>6} {t*1e6:>10.2f} {tf:>8.1f} {100*tf/peak:>7.1f}%")
    del ws
