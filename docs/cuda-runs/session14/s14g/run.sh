#!/bin/bash
# Session 14 call g (H100): the candidate binary (planar Q4_0 / Q8_0, direct streamed GEMV for
# planar and 16-byte-block formats, two blocks per SM): verify, verify-model both paths,
# memcheck on short runs (Q4_0 and Q4_K_M), bench gemv (graph) against the session's start.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14g; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -2 $O/verify.txt
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:200])")
for f in q4_0 q4_k_m; do
  timeout 30 ./flexkern synth-model --shape smollm2-135m --format $f --tokenizer bytes --vocab 49152 --out /tmp/s_$f.gguf > /dev/null 2>&1
  for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s_$f.gguf --tokens 64 > $O/vm_${f}_$p.txt 2>&1; echo "verify-model $f $p rc=$?: $(tail -1 $O/vm_${f}_$p.txt)"; done
  timeout 150 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern run --device cuda --model /tmp/s_$f.gguf --prompt "$P" -n 8 --temperature 0 --ctx 256 > $O/memcheck_$f.txt 2>&1; echo "memcheck $f rc=$?: $(grep -E 'ERROR SUMMARY' $O/memcheck_$f.txt)"
done
B() { # label binary env...
  local l=$1 bin=$2; shift 2
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k --n 14336,4096 --k 4096 > $O/g_$l.txt 2>&1
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0,q4_k,q6_k --n 4096 --k 14336 >> $O/g_$l.txt 2>&1
  echo "== $l"; grep -E "^(f16|q8_0|q4_0|q4_k|q6_k|copy)" $O/g_$l.txt | awk '{print $1,$2,$3,$4,$6}' | tr '\n' ';'; echo
}
B old ./flexkern_old X=1
B new ./flexkern X=1
B new_ring_q4k ./flexkern FLEXKERN_GEMV_DIRECT=0
B new2 ./flexkern X=1
grep -h "stream" $O/g_new.txt | awk '{print $NF}' | sort -u
date -u +%FT%TZ
