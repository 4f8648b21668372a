#!/bin/bash
# Session 21 call g: lifted integer constants held in 32 bits under FK_SMALL_VARS (a window's
# edge tiles compare in 32 bits) (new) against call f's binary (f): verify, alternating prefill.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21g; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5
for r in 1 2 3; do
  timeout 150 ./flexkern_f bench attn --device cuda --only prefill > $O/f_$r.txt 2>&1; echo "f $r rc=$?"
  timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/new_$r.txt 2>&1; echo "new $r rc=$?"
done
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for f in f_1 new_1 f_2 new_2 f_3 new_3; do echo "$f: $(row $O/$f.txt)"; done
