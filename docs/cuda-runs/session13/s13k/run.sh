#!/bin/bash
# Session 13 call k (H100): compute-sanitizer memcheck of verify --quick (the TMA prefill and
# GEMM cases among them); issue 13's decode shapes re-measured (bench attn decode + paged) after
# session 12's planner change, with the peers.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13k; mkdir -p $O
date -u +%FT%TZ
echo "== warm the kernel cache"; timeout 150 ./flexkern verify --device cuda --quick > $O/verify_quick.txt 2>&1; echo rc=$?; tail -1 $O/verify_quick.txt
echo "== memcheck verify --quick"; timeout 330 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo rc=$?; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.txt | head -3
