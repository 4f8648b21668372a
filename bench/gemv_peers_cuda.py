"""GEMV peers on the GPU, on the shapes of `flexkern bench gemv --device cuda` (N x K =
14336 x 4096 and 4096 x 4096, M = 1): cuBLAS f16 through torch.mv and F.linear, beside the
device-to-device copy bandwidth measured in the same process (bytes read + written). Weight
copies cycled so they overflow the L2 cache, as flexkern's benchmark does. Event-timed medians.
--graph: each pass over the copies replayed as one CUDA graph (as `flexkern bench gemv
--graph` and a graphed decode step run), beside the eager pass."""
import sys, torch
from cuda_timing import copy_bandwidth, event_median
import torch.nn.functional as F

dev = "cuda"
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
quick = "--quick" in sys.argv
graph = "--graph" in sys.argv
reps = 5 if quick else 30

def bench(fn, iters=reps, warm=3):
    return event_median(fn, iters, warm)

copy = copy_bandwidth(reps)
print(f"copy bandwidth (device to device, read + write): {copy/1e9:.0f} GB/s")
l2 = torch.cuda.get_device_properties(0).L2_cache_size
print(f"{'peer':<18} {'N':>6} {'K':>6} {'us/call':>10} {'GB/s':>9} {'of copy':>8}")
for (N, K) in [(14336, 4096), (4096, 4096)]:
    byts = N * K * 2
    copies = max(2, min(64, -(-4 * l2 // byts)))
    ws = [torch.randn(N, K, dtype=torch.float16, device=dev) for _ in range(copies)]
    v = torch.randn(K, dtype=torch.float16, device=dev)
    for peer, fn in [("torch.mv", lambda w: torch.mv(w, v)), ("F.linear", lambda w: F.linear(v[None], w))]:
        runs = [(peer, lambda: [fn(w) for w in ws])]
        if graph:
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                [fn(w) for w in ws]  # warm-up outside the capture
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(g):
                [fn(w) for w in ws]
            runs.append((peer + " graph", g.replay))
        for name, run in runs:
            t = bench(run) / copies
            gbs = byts / t / 1e9
            print(f"{name:<18} {N:>6} {K:>6} {t*1e6:>10.2f} {gbs:>9.0f} {100*gbs*1e9/copy:>7.1f}%")
    del ws
