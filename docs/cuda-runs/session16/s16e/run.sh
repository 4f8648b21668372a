#!/bin/bash
# Session 16 call e (H100), the closing binary (74b0f3c): decode attention and the merge with
# programmatic dependent launch, top-k's digit search as a block scan. Verify, verify-model,
# graph = eager, memcheck; bench gemv and cuBLAS peers; decode A/B against call d's binary
# ("d", 2155418): new, d, new after warm-ups.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s16e; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -8; tail -2 $O/verify.txt
S="The three laws of robotics are"
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:200])")
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 > $O/vm.txt 2>&1; echo "verify-model q4_k_m $p rc=$?: $(tail -1 $O/vm.txt)"; done
timeout 120 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 8 --temperature 0 --ctx 256 > $O/memcheck.txt 2>&1; echo "memcheck q4_k_m rc=$?: $(grep -E 'ERROR SUMMARY' $O/memcheck.txt)"
timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 600 --temperature 0 --ctx 700 > /tmp/g.txt 2>$O/g.txt
FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 600 --temperature 0 --ctx 700 > /tmp/e.txt 2>/dev/null
cmp /tmp/g.txt /tmp/e.txt && echo "graph = eager over 600 tokens ($(wc -c < /tmp/g.txt) bytes); $(grep -o 'decode:.*' $O/g.txt | cut -c1-40)"
timeout 20 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 40 --temperature 0.8 --top-k 40 --seed 7 --ctx 160 > /tmp/t1.txt 2>/dev/null; echo "sampled run rc=$?: $(wc -c < /tmp/t1.txt) bytes"
date -u +%FT%TZ
./flexkern bench gemv --device cuda --graph --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k --n 14336,4096 --k 4096 > $O/gemv.txt 2>&1
./flexkern bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0,q4_k,q6_k --n 4096 --k 14336 >> $O/gemv.txt 2>&1
grep -E "^(f16|q8_0|q4_0|q4_k|q6_k|copy)" $O/gemv.txt | awk '{print $1,$2,$3,$4,$5,$6}' | tr '\n' ';'; echo
PYTHONUNBUFFERED=1 timeout 60 python3 gemv_peers_cuda.py --graph > $O/peers.txt 2>&1; echo "== peers rc=$?"; grep -E "graph|copy" $O/peers.txt | head -8
date -u +%FT%TZ
run() { timeout 60 $1 run --device cuda --model /tmp/b.gguf --prompt "$S" -n $2 --temperature 0 --ctx 160 2>$O/r.txt >$O/text_$3.txt; }
for sf in "smollm2-135m q4_k_m" "smollm2-135m q4_0" "llama3-8b q4_k_m" "llama3-8b q4_0" "llama3-8b q8_0" "llama3-8b f16"; do
  set -- $sf
  timeout 120 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  echo "$1 $2 file $(stat -c %s /tmp/b.gguf) bytes"
  run ./flexkern 4 w; [ $2 != f16 ] && run ./flexkern_d 4 w
  for b in new d new; do
    [ $2 = f16 ] && [ $b = d ] && continue
    bin=./flexkern; [ $b = d ] && bin=./flexkern_d
    run $bin 128 $b; echo "$1 $2 $b $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
  done
  [ $2 != f16 ] && { cmp -s $O/text_new.txt $O/text_d.txt && echo "$2: same greedy text new/d" || echo "$2: greedy text differs new/d"; }
  rm -f /tmp/b.gguf
done
rm -f $O/r.txt $O/text_*.txt $O/vm.txt
date -u +%FT%TZ
