#!/bin/bash
# Session 21 call f, the closing kernels (2d442d2): prefill twice with the peers (PyTorch SDPA
# flash / cuDNN, FlexAttention) between them, and decode attention once (issue 13's shapes; its
# kernels are unchanged: a regression check).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21f; mkdir -p $O
date -u +%FT%TZ
timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/prefill_1.txt 2>&1; echo "prefill 1 rc=$?"
timeout 240 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/prefill_2.txt 2>&1; echo "prefill 2 rc=$?"
timeout 150 ./flexkern bench attn --device cuda --only decode > $O/decode.txt 2>&1; echo "decode rc=$?"
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for f in prefill_1 prefill_2; do echo "$f: $(row $O/$f.txt)"; done
grep -E "matmul|flex |sdpa" $O/peers.txt | awk '{print $(NF-1)}' | tr '\n' '|'; echo
grep -E "copy|^B|^decode|%" $O/decode.txt | grep -v "^  " | tail -14 | cut -c1-150
