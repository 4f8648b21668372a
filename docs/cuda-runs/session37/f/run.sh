#!/bin/bash
# Session 37 call f: the fused Q, K, V + RoPE launch now requires even head dims (its row pairs
# split rotated pairs otherwise); verify gained a head dim 63 case. s37d (the fix) runs the full
# verify; s37d0 (the same without the guard) runs verify --quick, where that case should fail.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/f; mkdir -p $O
D=../../../../.devcarry/s37d/flexkern
D0=../../../../.devcarry/s37d0/flexkern
date -u +%FT%TZ > $O/verify.txt
timeout 240 $D verify --device cuda >> $O/verify.txt 2>&1; echo "verify rc=$?"; tail -2 $O/verify.txt; grep "head dim" $O/verify.txt
timeout 150 $D0 verify --device cuda --quick > $O/verify_noguard.txt 2>&1; echo "verify (no guard) rc=$?"; tail -2 $O/verify_noguard.txt; grep "head dim" $O/verify_noguard.txt
