#!/bin/bash
# Session 20 call g, the closing code (kernel parameter blocks declared by the host): verify;
# decode runs (the greedy text against call f's); the decode attention bench.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s20g; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
L=$O/runs.txt
for i in 1 2; do timeout 40 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "s rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"; done
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench.txt 2>&1; echo "bench rc=$?"; grep -E '^decode' $O/bench.txt | grep -oE '[0-9.]+%' | tr '\n' ' '; echo
rm -f $O/out.txt
date -u +%FT%TZ
