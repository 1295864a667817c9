#!/usr/bin/env bash
# The data-value curve of issue 62 over the 1,200-anchor set that benchmarks/grow_anchors.sh commits, without
# generating anything:
#   benchmarks/anchors_curve.sh dataset                       # the decontaminated dataset of the labeled chunks
#   benchmarks/anchors_curve.sh encoder [sizes] [seeds]       # all-MiniLM-L6-v2: triples; the recipe (+ pairs)
#   benchmarks/anchors_curve.sh bellm [sizes] [seeds]         # raw SmolLM2 decoder: SimCSE (searched, paper), triples,
#                                                             #   triples + the labeled pairs
# `dataset` restores the committed chunks under data/growth, builds one version from the labeled ones (dedup, and
# decontamination against STS-B dev and test and SICK trial) and commits its tables under
# benchmarks/data/anchors_1200/dataset/ — the anchors in chunk order, so the first N are a row's N anchors. Each
# curve row's budget (steps, lr) is searched on STS-B dev the same way (benchmarks/data_value.py --search-budget);
# the per-seed rows go to benchmarks/results/anchors_1200_<backbone>_<data>.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:?dataset, encoder or bellm}; sizes=${2:-100,200,400,800,1200}; seeds=${3:-13,14,15}
kept=benchmarks/data/anchors_1200; version=$kept/dataset
sick=../shared/data/sick2014/SICK_trial.txt  # read in place, never committed
search=(--search-budget --steps 100 --search-max-steps 1600 --search-lrs 3e-5,1e-4 --seeds "$seeds" --sizes "$sizes")

curve() {  # curve <backbone> <name> <data_value flags…>
  local backbone=$1 name=$2; shift 2
  .venv/bin/python -m benchmarks.data_value --runs "$version/triples.parquet" --pairs "$version/pairs.parquet" \
    --backbone "$backbone" "${search[@]}" "$@" --table-out "benchmarks/results/anchors_1200_${backbone}_${name}.csv"
}

case $what in
  dataset)
    benchmarks/grow_anchors.sh --restore
    runs=()
    for chunk in data/growth/chunk-*/; do
      [[ -f $chunk/label-pairs/manifest.json ]] && runs+=(--run "${chunk%/}")
    done
    ./stsgen build-dataset "${runs[@]}" --output-dir data/datasets-anchors --eval-set "$sick"
    rm -rf "$version"; mkdir -p "$version"
    cp data/datasets-anchors/latest/{triples,pairs,removed}.parquet data/datasets-anchors/latest/{manifest.json,README.md} \
      "$version/"
    ;;
  encoder)
    curve encoder triples --data triples
    curve encoder recipe --data triples+pairs:label --regression-loss cosent --backbone-anchor 50
    ;;
  bellm)
    curve bellm all --data simcse,simcse-paper,triples,triples+pairs:label --regression-loss cosent
    ;;
  *) echo "anchors_curve.sh: dataset, encoder or bellm, not '$what'" >&2; exit 2 ;;
esac
