#!/bin/bash
# Session 13 call c (H100): 16-bit Q for the GPU prompt's attention (tensor cores), warm-up
# before the timed run. verify; verify-model default path; 8B prompt 512 for Q4_0, Q8_0, F16
# with per-op profile.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13c; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; grep -E "^convert" $O/verify.txt; tail -1 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model"; for p in default precise; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 32 > $O/vm_$p.txt 2>&1; echo "$p rc=$?: $(tail -1 $O/vm_$p.txt)"; done
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:511])")
for f in q4_0 q8_0 f16; do
  timeout 150 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 4 --temperature 0 --ctx 600 >/dev/null 2>&1
  for i in 1 2 3; do timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 32 --temperature 0 --ctx 600 2>$O/r.txt >/dev/null; echo "8b $f $(grep -h -o 'prefill.*' $O/r.txt | tail -1 | cut -c1-90)"; done
  if [ $f = q4_0 ]; then FLEXKERN_CUDA_PROFILE=1 FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 1 --temperature 0 --ctx 600 2>$O/prof.txt >/dev/null; tail -16 $O/prof.txt | cut -c 24-; fi
  rm -f /tmp/b.gguf
done
