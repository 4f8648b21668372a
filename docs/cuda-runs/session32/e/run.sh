#!/bin/bash
# Session 32 call e: the window's whole-stage copies address a row from its page's first byte
# in 32 bits (s32e: one 32 x 32 multiply-add a pass, not the slot's 64-bit products; ~12
# instructions a pass against ~20 in the fp8 kernel's SASS) against call d's kernels (s32d):
# bench attn --only decode alternating, four rounds; traces of B1 x 128k on s32e; verify on
# s32e, and with the window on every paged decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/e; mkdir -p $O
OLD=../../../../.devcarry/s32d/flexkern; NEW=../../../../.devcarry/s32e/flexkern
date -u +%FT%TZ
p() { grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $1 | awk '{printf "%s ", $(NF-3)}'; }
for r in 1 2 3 4; do for b in NEW OLD; do
  timeout 60 ${!b} bench attn --device cuda --only decode > $O/x.log 2>&1; echo "decode $b rc=$? queued % of read: $(p $O/x.log)"; cat $O/x.log >> $O/attn_$b.log
done; done
date -u +%FT%TZ
FLEXKERN_CUDA_TRACE=1 timeout 60 $NEW bench attn --device cuda --only L131072 > $O/t_NEW.log 2>&1
echo "== trace NEW rc=$?"
grep -E "trace:|^  decode" $O/t_NEW.log | grep -o "paged16.*\|Q ready.*" | sed 's/switch gaps[^|]*|//' | cut -c1-330
date -u +%FT%TZ
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
FLEXKERN_CUDA_PAGE_WINDOW=0 timeout 200 $NEW verify --device cuda > $O/verify_window.log 2>&1; echo "verify (window on every paged decode) rc=$?"
grep -E "FAIL|^verify|modules" $O/verify_window.log | cut -c1-200 | head -12
rm -f $O/x.log
date -u +%FT%TZ
