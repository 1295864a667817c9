#!/usr/bin/env bash
# Grow the data-value anchor set (issue 62) in resumable chunks, in the background, over several sessions:
#   nice -n 19 benchmarks/grow_anchors.sh [chunks] [per_chunk]      (defaults: 27 chunks of 50 sources)
# per_chunk applies to the chunks not committed yet. The committed set: chunks 1–26 of 50 sources, then chunk-27 of 123
# (`grow_anchors.sh 27 123`), sized in one run to reach the curve's 1,200 complete triples after build-dataset's
# removals (~84 % of sources end with a complete triple: 1,109 of 1,300 in chunks 1–26).
# Each chunk is one run under data/growth/chunk-<k>/ at today's defaults over the default corpus:
#   stage 1  `./stsgen generate --n <per_chunk> --seed <100+k> --avoid-used-sources`,
#   stage 2  `./stsgen retrieve` over its triples, stage 3 `./stsgen label` with the main job's labeler (the quick
#            preset: each sentence's 8 best-fitting of 16 candidate contexts).
# Each finished stage's committed files go to benchmarks/data/anchors_1200/chunk-<k>/ (stage 1's at the top, stage
# 3's under label-pairs/; stage 2's contexts are only the label's input and stay out of git), so a later session
# (whose data/ is empty) restores the committed chunks first — the next chunk avoids their sources — and goes on
# with the first missing stage. A stage killed half-way resumes from its own cache within a session.
# `grow_anchors.sh --restore` only restores the committed chunks (what benchmarks/anchors_curve.sh reads); dedup and
# decontamination are build-dataset's, over the chunks (anchors_curve.sh).
# GROW_OUT, GROW_KEPT and STSGEN move the run folder, the committed folder and the command (the tests' recording
# stand-in: tests/benchmarks/test_anchor_scripts.py).
set -euo pipefail
cd "$(dirname "$0")/.."
restore_only=false; [[ ${1:-} == --restore ]] && { restore_only=true; shift; }
chunks=${1:-27}; per_chunk=${2:-50}
out=${GROW_OUT:-data/growth}; kept=${GROW_KEPT:-benchmarks/data/anchors_1200}; stsgen=${STSGEN:-./stsgen}
mkdir -p "$out" "$kept"

keep() {  # keep <stage folder> <committed folder>: the manifest (naming no local path: store.portable) and its outputs
  local from=$1 to=$2 files
  # On a line of its own so that a manifest without outputs stops the script (set -e) instead of keeping nothing.
  files=$(.venv/bin/python -c 'import json,sys; print(*json.load(open(sys.argv[1]))["outputs"])' "$from/manifest.json")
  mkdir -p "$to"
  for f in $files; do
    cp "$from/$f" "$to/"
  done
  cp "$from/manifest.json" "$to/"
}

for k in $(seq -f "%02g" 1 "$chunks"); do
  run=chunk-$k; gen=$out/$run/generate-sts-triples; lab=$out/$run/label-pairs
  if [[ -f $kept/$run/manifest.json ]]; then  # committed: restore it beside the runs to come
    [[ -f $gen/manifest.json ]] || { mkdir -p "$gen"; cp "$kept/$run"/*.parquet "$kept/$run/manifest.json" "$gen/"; }
  elif $restore_only; then
    continue
  else
    echo "grow_anchors: $run stage 1 ($per_chunk anchors, seed $((100 + 10#$k))) from $(date -u +%FT%TZ)"
    "$stsgen" generate --n "$per_chunk" --seed $((100 + 10#$k)) --avoid-used-sources --output-dir "$out" --run "$run"
    keep "$gen" "$kept/$run"
  fi
  if [[ -f $kept/$run/label-pairs/manifest.json ]]; then
    [[ -f $lab/manifest.json ]] || { mkdir -p "$lab"; cp "$kept/$run/label-pairs"/* "$lab/"; }
    continue
  fi
  $restore_only && continue
  echo "grow_anchors: $run stages 2-3 from $(date -u +%FT%TZ)"
  "$stsgen" retrieve --sentences "$gen/triples.parquet" --output-dir "$out" --run "$run"
  "$stsgen" label --triples "$gen/triples.parquet" --contexts "$out/$run/retrieve-contexts/contexts.parquet" \
    --contexts-scored 8 --candidates 16 --output-dir "$out" --run "$run"
  keep "$lab" "$kept/$run/label-pairs"
  echo "grow_anchors: $run done at $(date -u +%FT%TZ)"
done
