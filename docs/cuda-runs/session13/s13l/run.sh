#!/bin/bash
# Session 13 call l (H100): issue 13's decode shapes with the final binary (bench attn decode +
# paged sections), then the PyTorch peers in the same call.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13l; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern bench attn --device cuda --only decode > $O/decode.txt 2>&1; echo rc=$?; grep -E "copy|^decode|^paged" $O/decode.txt | cut -c1-110 | head -20
timeout 120 ./flexkern bench attn --device cuda --only paged > $O/paged.txt 2>&1; echo rc=$?; grep -E "^paged|^decode" $O/paged.txt | cut -c1-110 | head -12
timeout 150 python3 attention_peers_cuda.py > $O/peers.txt 2>&1; echo rc=$?; tail -14 $O/peers.txt
