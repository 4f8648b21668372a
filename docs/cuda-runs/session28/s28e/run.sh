#!/bin/bash
# Session 28 call e, the closing code (e801eaf; kernels as call d's): verify; verify-model on the
# SmolLM2 synth (128-key D 64 tiles in its decode); bench attn (decode rated against the read-only
# rate, idle and queued; prefill) with the PyTorch peers measured the same way, twice; bench gemv
# --graph; 8B Q4_0, Q4_K_M and SmolLM2 decode (greedy text).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28e; mkdir -p $O
date -u +%FT%TZ
(timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?"; for m in q4_0 q4_k_m; do timeout 120 ./flexkern synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done) > $O/synth.txt 2>&1 &
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-160 | head -12
date -u +%FT%TZ
for p in precise default; do
  timeout 90 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf > $O/vm_$p.txt 2>&1; echo "verify-model $p rc=$?"; tail -2 $O/vm_$p.txt | cut -c1-220
done
date -u +%FT%TZ
timeout 150 ./flexkern bench attn --device cuda > $O/bench.txt 2>&1; echo "bench rc=$?"
grep -E "copy|^decode|^prefill|^chunked" $O/bench.txt | cut -c1-150
grep -o '^  decode[^:]*\|queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/bench.txt | paste - - | cut -c1-160
PYTHONUNBUFFERED=1 timeout 100 python3 attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
grep -E "copy|decode" $O/peers.txt | cut -c1-140 | head -20
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench2.txt 2>&1; echo "bench 2 rc=$?"
grep -E "^copy|^decode" $O/bench2.txt | cut -c1-150
grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/bench2.txt
PYTHONUNBUFFERED=1 timeout 100 python3 attention_peers_cuda.py > $O/peers2.txt 2>&1; echo "peers 2 rc=$?"
grep -E "copy|decode" $O/peers2.txt | cut -c1-140 | head -20
date -u +%FT%TZ
timeout 40 ./flexkern bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats q4_0,q4_k,q6_k,q8_0,f16 > $O/gemv.txt 2>&1
echo "k4096: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k|f16) ' $O/gemv.txt | awk '{printf "%s %s %s %s | ", $1, $2, $5, $6}')"
date -u +%FT%TZ
wait; cat $O/synth.txt
S="The three laws of robotics are"
for m in q4_0 q4_k_m s; do for r in 1 2; do
  timeout 30 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$m rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done
date -u +%FT%TZ
