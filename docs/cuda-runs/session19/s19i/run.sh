#!/bin/bash
# Session 19 call i (H100), the closing code: verify; the decode attention bench twice with the
# PyTorch peers between; SmolLM2 and 8B Q4_0 decode through the graph; the 8B step timeline;
# compute-sanitizer memcheck on a short SmolLM2 graph run.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19i; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench1.txt 2>&1; echo "bench1 rc=$?"; grep -E "^decode" $O/bench1.txt | awk '{printf "%s ", $(NF-2)} END {print ""}'
timeout 120 python3 attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"; grep -E "decode|copy" $O/peers.txt | awk '{print $NF, $(NF-3)}' | tr '\n' ' '; echo
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench2.txt 2>&1; echo "bench2 rc=$?"; grep -E "^decode" $O/bench2.txt | awk '{printf "%s ", $(NF-2)} END {print ""}'
L=$O/models.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for i in 1 2 3; do timeout 40 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2>> $L; echo "smol rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1)"; done
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
for i in 1 2; do timeout 40 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2>> $L; echo "8b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1)"; done
FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_8b.txt; echo "step rc=$?"
tr '\r' '\n' < $O/step_8b.txt | grep -v "^\s*$" | cut -c1-160 | head -14
rm -f /tmp/b.gguf
timeout 120 compute-sanitizer --tool memcheck ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 12 --temperature 0 --ctx 160 > $O/memcheck.txt 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck.txt | tail -1)"
date -u +%FT%TZ
