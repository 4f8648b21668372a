#!/bin/bash
# Session 10 call e: the committed Hopper kernel (ping-pong, no intra-warpgroup overlap) with peers; CUDA tune.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10e; mkdir -p $O
date -u +%FT%TZ > $O/date.txt
echo "== prefill (defaults)"; timeout 100 ./flexkern bench attn --device cuda --only prefill > $O/prefill.log 2>&1; echo rc=$?; tail -16 $O/prefill.log | cut -c1-72
echo "== prefill peers"; timeout 100 python3 prefill_peers_cuda.py > $O/prefill_peers.log 2>&1; echo rc=$?; grep -E "TFLOP|prefill" $O/prefill_peers.log | cut -c1-100 | head -24
echo "== prefill (defaults, again)"; timeout 100 ./flexkern bench attn --device cuda --only prefill > $O/prefill2.log 2>&1; echo rc=$?; tail -16 $O/prefill2.log | cut -c1-72
echo "== tune --quick"; FLEXKERN_TUNE_FILE=$O/tune.json timeout 150 ./flexkern tune --device cuda --quick > $O/tune.log 2>&1; echo rc=$?; tail -30 $O/tune.log | cut -c1-150
echo "== prefill with the tuned table"; FLEXKERN_TUNE_FILE=$O/tune.json timeout 90 ./flexkern bench attn --device cuda --only "S8192 D128" > $O/prefill_tuned.log 2>&1; echo rc=$?; grep -E "blocks" $O/prefill_tuned.log | cut -c1-130 | head -4
echo "== verify --quick"; timeout 100 ./flexkern verify --device cuda --quick > $O/verify_quick.log 2>&1; echo rc=$?; tail -2 $O/verify_quick.log
