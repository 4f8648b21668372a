#!/bin/bash
# Session 29 call j: the merge loads a warp's first partials beside the LSEs (one L2 round trip
# fewer). verify; memcheck on verify --quick; decode bench alternating with call i's binary
# (HEAD before it: the 128-byte L2 rule), three rounds; B1 x 128k block timeline with the merge.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/j; mkdir -p $O
D=../../../../.devcarry/s29j
date -u +%FT%TZ
timeout 200 $D/flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
timeout 120 compute-sanitizer --tool memcheck $D/flexkern verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
for r in 1 2 3; do for b in flexkern flexkern_i; do
  timeout 60 $D/$b bench attn --device cuda --only decode > $O/a.log 2>&1
  echo "== $b round $r" >> $O/attn.log; cat $O/a.log >> $O/attn.log
  echo "$b: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
  echo "   queued % of read: $(grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
done; done
rm -f $O/a.log
for b in flexkern flexkern_i; do
  FLEXKERN_CUDA_TRACE=1 timeout 60 $D/$b bench attn --device cuda --only L131072 > $O/trace_$b.log 2>&1
  echo "$b: $(grep -o 'merge:[^|]*' $O/trace_$b.log | head -4 | tr '\n' ';')"
done
date -u +%FT%TZ
