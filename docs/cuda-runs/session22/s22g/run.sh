#!/bin/bash
# Session 22 call g (H200), the closing code 7fee211: issue 15's prefill shapes, flexkern twice
# with PyTorch 2.11 (FlexAttention, SDPA flash and cuDNN) between them, in one call.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s22g; mkdir -p $O
date -u +%FT%TZ
timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/prefill_1.txt 2>&1; echo "prefill 1 rc=$?"
timeout 240 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/prefill_2.txt 2>&1; echo "prefill 2 rc=$?"
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for f in prefill_1 prefill_2; do echo "$f: $(row $O/$f.txt)"; done
grep -E "matmul|flex |sdpa" $O/peers.txt | awk '{print $(NF-1)}' | tr '\n' '|'; echo
grep -E "matmul|flex|sdpa" $O/peers.txt | cut -c1-110
