#!/bin/bash
# Session 10 call a: Hopper wgmma prefill kernel, first light.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10a; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $O/gpu.txt
echo "== quick prefill (wgmma)"; timeout 90 ./flexkern bench attn --device cuda --quick --only prefill > $O/quick_wg.log 2>&1; echo rc=$?; tail -12 $O/quick_wg.log
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo rc=$?; grep -E "fail|FAIL|verify:" $O/verify.log | head -40; tail -3 $O/verify.log
echo "== prefill wg"; timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/prefill_wg.log 2>&1; echo rc=$?; tail -22 $O/prefill_wg.log
echo "== prefill mma.sync"; FLEXKERN_CUDA_WGMMA=0 timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/prefill_mma.log 2>&1; echo rc=$?; tail -16 $O/prefill_mma.log
