#!/bin/bash
# Session 10 call f: flexkern tune --device cuda --quick (three stages at least for the Hopper kernel).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10f; mkdir -p $O
echo "== tune --quick"; FLEXKERN_TUNE_FILE=$O/tune.json timeout 330 ./flexkern tune --device cuda --quick > $O/tune.log 2>&1; echo rc=$?; cut -c1-150 $O/tune.log | tail -40; cat $O/tune.json
echo "== prefill with the tuned table"; FLEXKERN_TUNE_FILE=$O/tune.json timeout 60 ./flexkern bench attn --device cuda --only "S8192 D128" > $O/prefill_tuned.log 2>&1; echo rc=$?; grep -E "blocks" $O/prefill_tuned.log | cut -c1-130 | head -3; tail -8 $O/prefill_tuned.log | cut -c1-72
echo "== a corrupt table"; echo "{not json" > $O/bad.json; FLEXKERN_TUNE_FILE=$O/bad.json timeout 60 ./flexkern bench attn --device cuda --quick --only "causal paged" > $O/bad_table.log 2>&1; echo rc=$?; head -3 $O/bad_table.log | cut -c1-160
