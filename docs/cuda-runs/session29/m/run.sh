#!/bin/bash
# Session 29 call m: the final HEAD's decode bench beside the PyTorch peers (SDPA cuDNN / flash,
# FlexAttention) in the same call, timed the same way (idle and queued).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/m; mkdir -p $O
R=../../../..
date -u +%FT%TZ
timeout 60 $R/.devcarry/s29l/flexkern bench attn --device cuda --only decode > $O/bench.txt 2>&1; echo "bench rc=$?"
grep -E "^copy|^decode" $O/bench.txt | cut -c1-150
grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/bench.txt
PYTHONUNBUFFERED=1 timeout 110 python3 $R/bench/attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
grep -E "copy|read|decode" $O/peers.txt | cut -c1-160 | head -24
date -u +%FT%TZ
