#!/bin/bash
# Session 17 call h (H100), the closing binary (the K+V row loop for paged K/V only): verify;
# bench attn decode against HEAD fa0e2e5 ("old"), alternating old new new old.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s17h; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 120 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -5; tail -2 $O/verify.txt
i=0; for b in old new new old; do i=$((i+1)); bin=./flexkern_$b; [ $b = new ] && bin=./flexkern; timeout 40 $bin bench attn --device cuda --only decode > $O/decode_${i}_$b.txt 2>&1; echo "bench decode $b rc=$?"; grep -E "^decode" $O/decode_${i}_$b.txt | sed 's/  */ /g' | cut -d' ' -f2-7,9-10; done
date -u +%FT%TZ
