#!/bin/bash
# Session 32 call d: the page window's first loads without branches (s32d: cu_pages / first_page
# once, both pages in one round trip; main's window ran its two loads one after the other, four
# round trips before the first copy) against main (s32a): bench attn --only decode alternating,
# four rounds; traces of B1 x 128k on both; verify --device cuda on s32d, and with the window
# on every paged decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/d; mkdir -p $O
OLD=../../../../.devcarry/s32a/flexkern; NEW=../../../../.devcarry/s32d/flexkern
date -u +%FT%TZ
p() { grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $1 | awk '{printf "%s ", $(NF-3)}'; }
for r in 1 2 3 4; do for b in NEW OLD; do
  timeout 60 ${!b} bench attn --device cuda --only decode > $O/x.log 2>&1; echo "decode $b rc=$? queued % of read: $(p $O/x.log)"; cat $O/x.log >> $O/attn_$b.log
done; done
date -u +%FT%TZ
for b in NEW OLD; do
  FLEXKERN_CUDA_TRACE=1 timeout 60 ${!b} bench attn --device cuda --only L131072 > $O/t_$b.log 2>&1
  echo "== trace $b rc=$?"
  grep -E "trace:|^  decode" $O/t_$b.log | grep -o "paged16.*\|Q ready.*" | sed 's/switch gaps[^|]*|//' | cut -c1-330
done
date -u +%FT%TZ
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
FLEXKERN_CUDA_PAGE_WINDOW=0 timeout 200 $NEW verify --device cuda > $O/verify_window.log 2>&1; echo "verify (window on every paged decode) rc=$?"
grep -E "FAIL|^verify|modules" $O/verify_window.log | cut -c1-200 | head -12
rm -f $O/x.log
date -u +%FT%TZ
