"""What the PyTorch peer scripts share: CUDA-event timing (medians) and the device-to-device
copy bandwidth (bytes read + written), the limit every GPU figure is rated against."""
import torch


def event_median(fn, iters=30, warm=3):
    """Median seconds of `fn()` between two CUDA events, after `warm` untimed calls."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2] / 1e3


def event_median_queued(fn, iters=30, warm=3, spin_us=100):
    """As `event_median`, each call queued behind `spin_us` of GPU work (`torch.cuda._sleep`), so
    the host's dispatch lands while the GPU is busy and the events time the call's kernels alone
    (flexkern's `time_ms_queued`)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    s0 = torch.cuda.Event(enable_timing=True); e0 = torch.cuda.Event(enable_timing=True)
    s0.record(); torch.cuda._sleep(1_000_000); e0.record(); torch.cuda.synchronize()
    cycles = int(1_000_000 * spin_us * 1e-3 / s0.elapsed_time(e0))
    ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles); s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2] / 1e3


def copy_bandwidth(reps=30, device="cuda"):
    """Bytes read + written per second by a 1 GiB device-to-device copy (median of `reps`)."""
    x = torch.empty(2**30, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    return 2 * 2**30 / event_median(lambda: y.copy_(x), iters=reps)


def read_bandwidth(reps=30, device="cuda"):
    """Bytes read per second by a sum over 1 GiB of f32, queued behind GPU work (median of `reps`):
    the read-only limit a decode kernel is rated against (flexkern's `read_bandwidth`)."""
    x = torch.ones(2**28, dtype=torch.float32, device=device)
    return 2**30 / event_median_queued(lambda: x.sum(), iters=reps)
