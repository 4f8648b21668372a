#!/bin/bash
# Session 21 call h: the Hopper prefill's tile and stage choices on the closing code (d0ccd53),
# for the short-block variants: FLEXKERN_CUDA_MMA=tile,stages against the default (128 keys, 4
# stages at D64, 3 at D128), alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21h; mkdir -p $O
date -u +%FT%TZ
run() { tag=$1; shift; env "$@" timeout 100 ./flexkern bench attn --device cuda --only prefill > $O/$tag.txt 2>&1; echo "$tag rc=$?"; }
for r in 1 2; do
  run def_$r X=1
  run t64s4_$r FLEXKERN_CUDA_MMA=64,4
  run t128s6_$r FLEXKERN_CUDA_MMA=128,6
  run t64s8_$r FLEXKERN_CUDA_MMA=64,8
done
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for f in def_1 t64s4_1 t128s6_1 t64s8_1 def_2 t64s4_2 t128s6_2 t64s8_2; do echo "$f: $(row $O/$f.txt)"; done
grep -E "^  prefill B4 H16 S4096 D64 sliding|^  prefill B2 H16 S8192 D128 sliding" $O/t128s6_1.txt $O/t64s8_1.txt | sed 's/.*: attn_/attn_/' | cut -c1-90
