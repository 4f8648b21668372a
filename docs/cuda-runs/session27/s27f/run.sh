#!/bin/bash
# Session 27 call f, the closing code: verify; memcheck on verify --quick; bench attn (decode and
# prefill) with the PyTorch decode peers in the same call; bench gemv --graph; 8B Q4_0, Q4_K_M,
# Q8_0 and SmolLM2 decode (greedy text).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s27f; mkdir -p $O
date -u +%FT%TZ
(for m in q4_0 q4_k_m q8_0; do timeout 100 ./flexkern synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done; timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?") > $O/synth.txt 2>&1 &
timeout 170 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-160 | head -24
date -u +%FT%TZ
timeout 240 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.txt | tail -3
date -u +%FT%TZ
timeout 120 ./flexkern bench attn --device cuda > $O/bench.txt 2>&1; echo "bench rc=$?"
grep -E "copy|^decode|^prefill|^chunked" $O/bench.txt | cut -c1-150
PYTHONUNBUFFERED=1 timeout 100 python3 attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
grep -E "copy|decode" $O/peers.txt | cut -c1-140 | head -20
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench2.txt 2>&1; echo "bench 2 rc=$?"
grep -E "^decode" $O/bench2.txt | cut -c1-150
date -u +%FT%TZ
for k in 4096 14336; do
  timeout 40 ./flexkern bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k $k --formats q4_0,q4_k,q6_k,q8_0,f16 > $O/g.txt 2>&1
  echo "== k$k" >> $O/gemv.txt; cat $O/g.txt >> $O/gemv.txt
  echo "k$k: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k|f16) ' $O/g.txt | awk '{printf "%s %s %s %s | ", $1, $2, $5, $6}')"
done
date -u +%FT%TZ
wait; cat $O/synth.txt
S="The three laws of robotics are"
for m in q4_0 q4_k_m q8_0 s; do for r in 1 2; do
  timeout 30 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$m rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done
date -u +%FT%TZ
