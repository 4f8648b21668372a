#!/bin/bash
# Session 19 call j (H100), the closing binary (call i's): the decode attention bench with the
# PyTorch peers between two runs (call i's peers script lacked cuda_timing.py).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19j; mkdir -p $O
date -u +%FT%TZ
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench1.txt 2>&1; echo "bench1 rc=$?"; grep -E "^decode" $O/bench1.txt | awk '{printf "%s ", $(NF-3)} END {print ""}'
timeout 120 python3 attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"; grep -E "^decode" $O/peers.txt | awk '{printf "%s ", $NF} END {print ""}'
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench2.txt 2>&1; echo "bench2 rc=$?"; grep -E "^decode" $O/bench2.txt | awk '{printf "%s ", $(NF-3)} END {print ""}'
date -u +%FT%TZ
