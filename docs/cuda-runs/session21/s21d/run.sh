#!/bin/bash
# Session 21 call d: branch-free document edge tiles and the overlap off by default (new)
# against call c's binary with FLEXKERN_CUDA_WG_OVERLAP=0 (c): verify, the trace, alternating
# prefill runs, then the peers (PyTorch SDPA and FlexAttention) in the same call.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21d; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5
FLEXKERN_CUDA_TRACE=1 timeout 200 ./flexkern bench attn --device cuda --only prefill > $O/trace.txt 2>&1; echo "trace rc=$?"
for r in 1 2; do
  FLEXKERN_CUDA_WG_OVERLAP=0 timeout 150 ./flexkern_c bench attn --device cuda --only prefill > $O/c_$r.txt 2>&1; echo "c $r rc=$?"
  timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/new_$r.txt 2>&1; echo "new $r rc=$?"
done
echo "== peers"; timeout 240 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for f in c_1 new_1 c_2 new_2 trace; do echo "$f: $(row $O/$f.txt)"; done
grep -E "matmul|flex |sdpa" $O/peers.txt | awk '{print $(NF-1)}' | tr '\n' '|'; echo
grep "trace:" $O/trace.txt | sed 's/.*durations/durations/; s/switch gaps.*phases/phases/; s/phases.*consumer/consumer/' | cut -c1-200
