#!/usr/bin/env bash
# Grow the data-value anchor set (issue 62) in resumable chunks, in the background, over several sessions:
#   nice -n 19 benchmarks/grow_anchors.sh [chunks] [per_chunk]      (defaults: 24 chunks of 50 = 1,200 anchors)
# Each chunk is one stage-1 run at today's defaults over the default corpus (`./stsgen generate --n <per_chunk>
# --seed <100+k> --avoid-used-sources`) under data/growth/; a finished chunk's triples, quarantine and manifest are
# copied to benchmarks/data/anchors_1200/chunk-<k>/ (committed), so a later session (whose data/ is empty) restores
# the committed chunks first — the next chunk avoids their sources — and goes on with the first missing chunk.
# A chunk killed half-way restarts from its own response cache within a session, from scratch across sessions.
set -euo pipefail
cd "$(dirname "$0")/.."
chunks=${1:-24}; per_chunk=${2:-50}
out=data/growth; kept=benchmarks/data/anchors_1200
mkdir -p "$out" "$kept"
for k in $(seq -f "%02g" 1 "$chunks"); do
  run=chunk-$k
  if [[ -f $kept/$run/manifest.json ]]; then  # committed: restore it beside the runs to come
    [[ -d $out/$run/generate-sts-triples ]] || { mkdir -p "$out/$run"; cp -r "$kept/$run" "$out/$run/generate-sts-triples"; }
    continue
  fi
  echo "grow_anchors: $run ($per_chunk anchors, seed $((100 + 10#$k))) from $(date -u +%FT%TZ)"
  ./stsgen generate --n "$per_chunk" --seed $((100 + 10#$k)) --avoid-used-sources --output-dir "$out" --run "$run"
  mkdir -p "$kept/$run"
  for f in triples.parquet rejected.parquet manifest.json; do
    [[ -f $out/$run/generate-sts-triples/$f ]] && cp "$out/$run/generate-sts-triples/$f" "$kept/$run/"
  done
  # The committed manifest names no local path: the checkout's own prefix becomes repository-relative.
  sed -i "s#$PWD/##g" "$kept/$run/manifest.json"
  echo "grow_anchors: $run done at $(date -u +%FT%TZ)"
done
