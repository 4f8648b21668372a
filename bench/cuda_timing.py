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


def copy_bandwidth(reps=30, device="cuda"):
    """Bytes read + written per second by a 1 GiB device-to-device copy (median of `reps`)."""
    x = torch.empty(2**30, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    return 2 * 2**30 / event_median(lambda: y.copy_(x), iters=reps)
