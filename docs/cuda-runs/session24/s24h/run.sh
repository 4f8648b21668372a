#!/bin/bash
# Session 24 call h (H200): 8B Q4_K_M decode, the closing code against the same without Q8_K's
# one pass (nok) and session 23's closing GPU code, three rounds alternating; verify of nok.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s24h; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
L=$O/runs.txt
timeout 100 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/q4_k_m.gguf > /dev/null 2>&1; echo "synth rc=$?"
for r in 1 2 3; do for b in flexkern flexkern_nok flexkern_s23; do
  timeout 40 ./$b run --device cuda --model /tmp/q4_k_m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "q4_k_m $b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done
date -u +%FT%TZ
timeout 150 ./flexkern_nok verify --device cuda > $O/verify_nok.txt 2>&1; echo "verify nok rc=$?"; tail -2 $O/verify_nok.txt
date -u +%FT%TZ
