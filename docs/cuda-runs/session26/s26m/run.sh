#!/bin/bash
# Session 26 call m: the down projection in the 8B step, closing binary against call h's (two
# lanes a 32-block at k 14336 or one): step traces of Q4_0 and Q8_0, and more decode rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26m; mkdir -p $O
for m in q4_0 q8_0; do timeout 150 ./flexkern synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done
S="The three laws of robotics are"
for m in q4_0 q8_0; do
  for b in flexkern flexkern_old; do
    FLEXKERN_CUDA_TRACE=step timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > /dev/null 2> $O/trace_${m}_$b.txt
    echo "== $m $b"; grep -E "fk_gemv|step trace: [0-9]" $O/trace_${m}_$b.txt | cut -c1-140 | head -6
  done
  for r in 1 2 3; do for b in flexkern flexkern_old; do
    timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$m $b rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
  done; done
done
