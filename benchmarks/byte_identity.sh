#!/bin/bash
# Byte identity of a refactor: the pipeline (quick preset, 6 sources of the examples corpus, seed 13, every stage) from
# two checkouts, one after the other with the same STSGEN_HOME (the second run's LLM answers all come from the
# response cache the first filled; every other step is computed again), then the sha256 of every table and the model.
#   git worktree add /tmp/wt_before <commit>; git worktree add /tmp/wt_after HEAD
#   benchmarks/byte_identity.sh /tmp/wt_before /tmp/wt_after /tmp/bytes
# (the `*_cached` columns of triples.parquet differ by design: the second run's answers are cached)
set -u
before=$1 after=$2 out=$3
PY=$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python
mkdir -p "$out"
for side in before after; do
  dir=${!side}
  start=$(date +%s)
  (cd "$dir" && "$PY" -m flows.cli pipeline --n 6 --corpus data/examples/docs --seed 13 \
      --output-dir "$out/$side" --run r) > "$out/$side.log" 2>&1
  echo "$side rc=$? $(( $(date +%s) - start )) s"
done
for side in before after; do
  echo "== $side"
  (cd "$out/$side/r" && find . \( -name "*.parquet" -o -name "model.safetensors" \) -not -path "*/work/*" | sort \
     | xargs sha256sum)
  # The stages' cache keys: a refactor that keeps them lets an upgraded checkout reuse committed outputs.
  "$PY" -c 'import json, pathlib, sys
for m in sorted(pathlib.Path(sys.argv[1]).glob("*/manifest.json")):
    print("key", m.parent.name, json.loads(m.read_text()).get("cache_key"))' "$out/$side/r"
done
