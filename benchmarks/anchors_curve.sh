#!/usr/bin/env bash
# The data-value curve of issue 62 over the 1,200-anchor set that benchmarks/grow_anchors.sh commits, without
# generating anything:
#   benchmarks/anchors_curve.sh dataset                       # the decontaminated dataset of the labeled chunks
#   benchmarks/anchors_curve.sh encoder [sizes] [seeds]       # all-MiniLM-L6-v2 at the product's budget: triples
#                                                             #   (the triples-only recipe), the recipe (+ pairs)
#   benchmarks/anchors_curve.sh encoder-search [sizes] [seeds] # the same two rows, each budget searched on dev
#   benchmarks/anchors_curve.sh lever <name> [sizes] [seeds]  # the recipe with one change, where the curve flattens:
#                                                             #   400steps, anchor10 / anchor0 (backbone anchor 10
#                                                             #   or none, not 50),
#                                                             #   mined (+ a hard negative the backbone mines itself),
#                                                             #   selfmined (+ one the surrogate mines: the `weekly`
#                                                             #   model, so `weekly` runs first),
#                                                             #   pairsonly (the labeled pairs without the triples),
#                                                             #   nopairs (the triples without the labeled pairs),
#                                                             #   teacher (the same pairs, all-mpnet-base-v2's cosine
#                                                             #   as their label: is the label the ceiling?),
#                                                             #   lr3e-5 (the triples-only recipe's lr, not `auto`) or
#                                                             #   mpnet (a larger student: all-mpnet-base-v2, 109M,
#                                                             #   after `./stsgen teacher fetch`; the CSV's backbone
#                                                             #   row is its own, so pair against that, not MiniLM's)
#                                                             #   or mpnet400 (that student at 400 steps: its best
#                                                             #   step was the last at 200) or
#                                                             #   distilled (the teacher lever with the larger
#                                                             #   weekly model as the teacher: run
#                                                             #   `WEEKLY_STUDENT=all-mpnet-base-v2 WEEKLY_STEPS=400
#                                                             #   … weekly` first) or distilled0 (the same without
#                                                             #   the backbone anchor: the teacher's labels in its
#                                                             #   place)
#   benchmarks/anchors_curve.sh genre [sizes] [seeds]         # the recipe on anchors from SICK train's captions
#                                                             #   (STS-B's and SICK's caption genre), not the default
#                                                             #   corpus (sizes: default 84)
#   benchmarks/anchors_curve.sh weekly                        # the weekly deployment's model over the labeled chunks
#                                                             #   (WEEKLY_STUDENT=all-mpnet-base-v2: on that student,
#                                                             #   under <GROW_OUT>-weekly-<name> and
#                                                             #   benchmarks/results/anchors_1200_weekly_<name>/;
#                                                             #   WEEKLY_STEPS=400: train.steps, the folders'
#                                                             #   names end -400steps / _400steps; WEEKLY_SEED=14:
#                                                             #   train.seed, not TrainSettings' 13, the names
#                                                             #   end -seed14 / _seed14)
#   benchmarks/anchors_curve.sh bellm [sizes] [seeds]         # raw SmolLM2 decoder: SimCSE (searched, paper), triples,
#                                                             #   triples + the labeled pairs
#   benchmarks/anchors_curve.sh bellm-fixed [sizes] [seeds]   # the same decoder at the 400-anchor CPU rows' budget,
#                                                             #   unsearched (100 steps, lr 3e-5, bf16 where the CPU
#                                                             #   has it): SimCSE, SimCSE's paper setting, triples;
#                                                             #   then triples + the labeled pairs (CoSENT on stage
#                                                             #   3's label) in a CSV of its own, then it at 200
#                                                             #   steps (the triples' 100 batches), SimCSE and the
#                                                             #   triples alone at 200, each in a CSV of its own —
#                                                             #   what a GPU-less machine affords (sizes: default 1200)
#   benchmarks/anchors_curve.sh bellm-rung <data> <steps> <lr> [sizes] [seeds]
#                                                             # one rung of the decoder's budget search by hand, where
#                                                             #   the whole search is out of reach: simcse, triples
#                                                             #   or pairs (triples + the labeled pairs) at one fixed
#                                                             #   budget, one harness run a seed, so each seed's CSV
#                                                             #   lands on its own; `python -m benchmarks.
#                                                             #   data_value_search` over the rungs' CSVs names the
#                                                             #   next (sizes: default 1200; the CSVs: anchors_1200_
#                                                             #   bellm_fixed_<data>_<steps>steps[_lr<lr as typed>,
#                                                             #   unless 3e-5]_<sizes>_seed<s>.csv)
# `dataset` builds one version from the committed labeled chunks (dedup, and decontamination against STS-B dev and
# test and SICK trial) and commits its tables under benchmarks/data/anchors_1200/dataset/ — the anchors in chunk
# order, so the first N are a row's N anchors: the chunks are copied as run folders without a .run.json, so
# build-dataset orders them by name whichever session grew which.
# `encoder` trains what every entry point ships (TrainSettings' defaults, tasks/train/settings.py): 200 steps, the
# recipe at lr `auto` (1e-4 from 75 training anchors), triples alone at the triples-only recipe's 3e-5. `bellm` and
# `encoder-search` search each row's budget (steps, lr) on STS-B dev the same way (benchmarks/data_value.py
# --search-budget): hours per size on a GPU-less machine. The per-seed rows go to
# benchmarks/results/anchors_1200_<backbone>_<name>_<sizes>.csv (a size added later: a CSV of its own). `weekly`
# runs the real deployment (`prefect deployment run train-on-dataset/weekly`, served by `./stsgen serve` against a
# Prefect server of its own, its scheduler off, on WEEKLY_PORT, default 4242) over the same copies, decontaminated
# against the same sets as `dataset` and reporting SICK trial beside STS-B test; its eval.json and manifest go to
# benchmarks/results/anchors_1200_weekly/ (with WEEKLY_STUDENT, a registered name or a folder:
# anchors_1200_weekly_<its base name>/; with WEEKLY_STEPS=N both names end in N steps; `lever selfmined` always
# mines with MiniLM's weekly model, `lever distilled*` always labels with mpnet's at 400 steps). `genre`
# writes SICK train's sentences (../shared, read in place; none an evaluation sentence: benchmarks/corpora.py
# caption_corpus) as a corpus under <GROW_OUT>-genre, samples GENRE_SOURCES (default 140) sources from it as
# grow_anchors.sh grows a chunk (stage 2 over the default corpus, as the curve's), builds their dataset as `dataset`
# does and trains the recipe on it: a row to pair with the recipe's row of the same size (nothing of it goes into git
# but that CSV: its anchors are SICK's sentences).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:?dataset, encoder, encoder-search, lever, genre, weekly, bellm, bellm-fixed or bellm-rung}
# GROW_OUT, GROW_KEPT, STSGEN as for grow_anchors.sh; CURVE_PYTHON runs the harness, CURVE_PREFECT is the Prefect CLI
# and CURVE_RESULTS the results folder (the tests' stand-ins and a folder of their own).
out=${GROW_OUT:-data/growth}; kept=${GROW_KEPT:-benchmarks/data/anchors_1200}; stsgen=${STSGEN:-./stsgen}
[[ $out == /* ]] || out=$PWD/$out
student=${WEEKLY_STUDENT:-}; student_name=${student:+$(basename "$student")}  # empty: the default student, MiniLM
steps=${WEEKLY_STEPS:-}; seed=${WEEKLY_SEED:-}  # empty: TrainSettings' own budget and seed
whole_number() {  # whole_number <VAR> <value> <pattern>: an unset value passes; anything else must match
  [[ -z $2 || $2 =~ $3 ]] || { echo "anchors_curve: $1 must be a whole number, not '$2'" >&2; exit 2; }
}
if [[ $what == weekly ]]; then  # refused before a server starts or a folder is named by them
  whole_number WEEKLY_STEPS "$steps" '^[1-9][0-9]{0,5}$'; whole_number WEEKLY_SEED "$seed" '^(0|[1-9][0-9]{0,8})$'
fi
# A weekly run's names end in what it was given: weekly_suffix <separator> <student> <steps> <seed>.
weekly_suffix() { echo "${2:+$1$2}${3:+$1${3}steps}${4:+${1}seed$4}"; }
weekly_out() { echo "$out-weekly$(weekly_suffix - "$@")"; }  # its folder
weekly_model() { echo "$(weekly_out "$@")/latest/train-surrogate/model"; }  # the model that run shipped
weekly=$(weekly_out "$student_name" "$steps" "$seed")
# Each lever: the flags that change the shipped recipe (argparse keeps a repeated option's last value).
declare -A levers=([400steps]="--steps 400" [anchor10]="--backbone-anchor 10"
                   [anchor0]="--backbone-anchor 0" [mined]="--data mined+pairs:label"
                   [pairsonly]="--data pairs:label" [nopairs]="--data triples"
                   [teacher]="--data triples+pairs:teacher" [lr3e-5]="--lr 3e-5"
                   [mpnet]="--source all-mpnet-base-v2" [mpnet400]="--source all-mpnet-base-v2 --steps 400"
                   [selfmined]="--data mined+pairs:label --miner-name weekly"  # + its --miner path, below
                   [distilled]="--data triples+pairs:teacher --teacher-name weekly-mpnet400"  # + its --teacher
                   [distilled0]="--data triples+pairs:teacher --teacher-name weekly-mpnet400 --backbone-anchor 0")
if [[ $what == lever ]]; then lever=${2:?lever: one of ${!levers[*]}}; shift; fi
if [[ $what == bellm-rung ]]; then  # its data and budget, refused before anything trains
  rung_data=${2:?bellm-rung: simcse, triples or pairs}; rung_steps=${3:?bellm-rung: steps}
  rung_lr=${4:?bellm-rung: lr}
  [[ $rung_data =~ ^(simcse|triples|pairs)$ ]] || {
    echo "anchors_curve.sh bellm-rung: simcse, triples or pairs, not '$rung_data'" >&2; exit 2; }
  whole_number steps "$rung_steps" '^[1-9][0-9]{0,5}$'
  [[ $rung_lr =~ ^[0-9]+(\.[0-9]+)?(e-?[0-9]+)?$ && ${rung_lr%%e*} =~ [1-9] ]] || {
    echo "anchors_curve.sh bellm-rung: lr must be a number above 0 such as 3e-5, not '$rung_lr'" >&2; exit 2; }
  shift 3
  # Each seed trains for most of an hour: a bad or repeated one is refused now, not after the first has trained.
  [[ ${3:-13} =~ ^[0-9]+(,[0-9]+)*$ && -z $(tr , '\n' <<< "${3:-}" | sort | uniq -d) ]] || {
    echo "anchors_curve.sh bellm-rung: seeds must be distinct whole numbers, comma-separated, not '$3'" >&2; exit 2; }
fi
all_sizes=100,200,400,800,1200; [[ $what == genre ]] && all_sizes=84  # 140 sources: 84 after build-dataset
[[ $what == bellm-fixed || $what == bellm-rung ]] && all_sizes=1200  # hours a seed on 2 cores: the target's size only
sizes=${2:-$all_sizes}; seeds=${3:-13,14,15}; suffix=  # suffix: set per call by bellm-rung, never by the caller
python=${CURVE_PYTHON:-.venv/bin/python}; prefect=${CURVE_PREFECT:-.venv/bin/prefect}
results=${CURVE_RESULTS:-benchmarks/results}
version=$kept/dataset; datasets=$out-datasets; labeled=$out-labeled; port=${WEEKLY_PORT:-4242}
sick=../shared/data/sick2014/SICK_trial.txt  # read in place, never committed
search=(--search-budget --steps 100 --search-max-steps 1600 --search-lrs 3e-5,1e-4)
pairs=(--data triples+pairs:label --regression-loss cosent)  # the triples + CoSENT on stage 3's label
recipe=("${pairs[@]}" --backbone-anchor 50)
shipped=(--steps 200 --lr 1e-4)  # the recipe's budget in every entry point (TrainSettings: lr `auto` from 75 anchors)

stop_serving() {  # the runner pauses its deployments on SIGTERM, so it goes before the server (killed if it hangs)
  [[ -n ${serving:-} ]] || return 0
  kill "$serving" 2>/dev/null || return 0
  for _ in $(seq 30); do kill -0 "$serving" 2>/dev/null || return 0; sleep 1; done
  kill -9 "$serving"
}

labeled_runs() {  # labeled_runs: copies of the committed labeled chunks as run folders, printed in name order
  rm -rf "$labeled"; mkdir -p "$labeled"
  local chunk run
  for chunk in "$kept"/chunk-*/; do
    [[ -f $chunk/label-pairs/manifest.json ]] || continue
    run=$labeled/$(basename "$chunk"); mkdir -p "$run/generate-sts-triples"
    cp "$chunk"/*.parquet "$chunk/manifest.json" "$run/generate-sts-triples/"
    cp -r "$chunk/label-pairs" "$run/"
    echo "$run"
  done
}

labeled_chunks() {  # labeled_chunks: `chunks`, the labeled runs' folders; the script stops when there is none
  mapfile -t chunks < <(labeled_runs)
  (( ${#chunks[@]} )) || { echo "anchors_curve: no labeled chunk under $kept" >&2; exit 1; }
}

wait_for() {  # wait_for <pid> <what> <command…>: until the command succeeds; fails if the process died or 2 min pass
  local pid=$1 what=$2; shift 2
  for _ in $(seq 60); do
    "$@" > /dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "anchors_curve: $what exited (its log: $weekly.*.log)" >&2; return 1; }
    sleep 2
  done
  echo "anchors_curve: no $what after 2 min" >&2; return 1
}

curve() {  # curve <backbone> <name> <data_value flags…>; `suffix` ends the CSV's name
  local backbone=$1 name=$2; shift 2
  "$python" -m benchmarks.data_value --runs "$version/triples.parquet" --pairs "$version/pairs.parquet" \
    --backbone "$backbone" --seeds "$seeds" --sizes "$sizes" "$@" \
    --table-out "$results/anchors_1200_${backbone}_${name}_${sizes//,/-}${suffix:-}.csv"
}

case $what in
  dataset)
    labeled_chunks
    runs=(); for run in "${chunks[@]}"; do runs+=(--run "$run"); done
    "$stsgen" build-dataset "${runs[@]}" --output-dir "$datasets" --eval-set "$sick"
    rm -rf "$version"; mkdir -p "$version"
    cp "$datasets"/latest/{triples,pairs,removed}.parquet "$datasets"/latest/{manifest.json,README.md} "$version/"
    ;;
  encoder)
    curve encoder triples --data triples --steps 200 --lr 3e-5
    curve encoder recipe "${recipe[@]}" "${shipped[@]}"
    ;;
  encoder-search)
    curve encoder triples_searched --data triples "${search[@]}"
    curve encoder recipe_searched "${recipe[@]}" "${search[@]}"
    ;;
  lever)  # the shipped recipe's flags, then the lever's
    [[ -v levers[$lever] ]] || { echo "anchors_curve.sh lever: one of ${!levers[*]}, not '$lever'" >&2; exit 2; }
    read -ra change <<< "${levers[$lever]}"  # the flags hold no space; a path (GROW_OUT's) is one word of its own
    [[ $lever == selfmined ]] && change+=(--miner "$(weekly_model)")
    [[ $lever == distilled* ]] && change+=(--teacher "$(weekly_model all-mpnet-base-v2 400)")
    curve encoder "recipe_$lever" "${recipe[@]}" "${shipped[@]}" "${change[@]}"
    ;;
  genre)
    genre=$out-genre; run=captions; gen=$genre/$run/generate-sts-triples
    "$python" -m benchmarks.corpora "$genre/captions.jsonl"
    "$stsgen" generate --n "${GENRE_SOURCES:-140}" --seed 201 --corpus "$genre/captions.jsonl" --output-dir "$genre" \
      --run "$run"
    "$stsgen" retrieve --sentences "$gen/triples.parquet" --output-dir "$genre" --run "$run"
    "$stsgen" label --triples "$gen/triples.parquet" --contexts "$genre/$run/retrieve-contexts/contexts.parquet" \
      --contexts-scored 8 --candidates 16 --output-dir "$genre" --run "$run"
    rm -rf "$genre-datasets"
    "$stsgen" build-dataset --run "$genre/$run" --output-dir "$genre-datasets" --eval-set "$sick"
    version=$genre-datasets/latest
    curve encoder recipe_genre "${recipe[@]}" "${shipped[@]}"
    ;;
  weekly)
    labeled_chunks
    export PREFECT_HOME=$weekly.prefect  # a server of its own: only this checkout's deployments in it
    rm -rf "$PREFECT_HOME" "$weekly"; export PREFECT_API_URL=http://127.0.0.1:$port/api
    if curl -sf "$PREFECT_API_URL/health" > /dev/null; then
      echo "anchors_curve: a server already answers on port $port: set WEEKLY_PORT" >&2; exit 1
    fi
    trap 'stop_serving || true; [[ -z ${server:-} ]] || kill "$server" 2>/dev/null || true' EXIT
    # The scheduler off: `serve` registers every deployment, and a nightly one must not start during the measurement.
    PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED=false "$stsgen" ui --port "$port" > "$weekly.server.log" 2>&1 &
    server=$!
    wait_for "$server" "Prefect server" curl -sf "$PREFECT_API_URL/health"
    "$stsgen" serve > "$weekly.serve.log" 2>&1 & serving=$!
    wait_for "$serving" "served weekly deployment" "$prefect" deployment inspect train-on-dataset/weekly
    # The run's parameters written by json.dumps: a folder or student name with quotes or backslashes stays one string.
    .venv/bin/python -c 'import json, sys
weekly, sick, student, steps, seed, *runs = sys.argv[1:]
train = {"eval_sets": ["stsb-test", sick], **({"backbone": {"source": student}} if student else {}),
         **({"steps": int(steps)} if steps else {}), **({"seed": int(seed)} if seed else {})}
print(json.dumps({"runs": runs, "datasets_dir": f"{weekly}-datasets", "output_dir": weekly,
                  "dataset": {"eval_sets": ["stsb-dev", "stsb-test", sick]}, "train": train}))' \
      "$weekly" "$sick" "$student" "$steps" "$seed" "${chunks[@]}" |
      "$prefect" deployment run train-on-dataset/weekly --watch --params -
    results=$results/anchors_1200_weekly$(weekly_suffix _ "$student_name" "$steps" "$seed"); mkdir -p "$results"
    cp "$weekly"/latest/train-surrogate/{eval.json,manifest.json} "$results/"
    if grep -l "$(realpath ..)/" "$results"/*.json; then  # the committed results name no local path
      echo "anchors_curve: $results names a local path" >&2; exit 1
    fi
    ;;
  bellm)
    curve bellm all --data simcse,simcse-paper,triples,triples+pairs:label --regression-loss cosent "${search[@]}"
    ;;
  bellm-fixed)  # the budget of data_value_bellm_400_cpu.csv, so the 1,200 point extends that curve like for like
    fixed=(--steps 100 --lr 3e-5 --precision auto)
    curve bellm fixed --data simcse,simcse-paper,triples "${fixed[@]}"
    curve bellm fixed_pairs "${pairs[@]}" "${fixed[@]}"  # a CSV of its own
    # The round-robin sampler alternates the two, so at 100 steps the triples get 50 batches: at 200, the triples
    # row's 100 (argparse keeps the last --steps); and SimCSE, still rising at 100, at the same 200 steps; and the
    # triples alone at 200, so the labels' share of the longer row is told from the steps'.
    curve bellm fixed_pairs_200steps "${pairs[@]}" "${fixed[@]}" --steps 200
    for data in simcse triples; do curve bellm "fixed_${data}_200steps" --data "$data" "${fixed[@]}" --steps 200; done
    ;;
  bellm-rung)  # bellm-fixed's harness flags at the rung's budget; the lr in the name only where it is not 3e-5
    fixed=(--steps "$rung_steps" --lr "$rung_lr" --precision auto); data=(--data "$rung_data")
    [[ $rung_data == pairs ]] && data=("${pairs[@]}")
    name=fixed_${rung_data}_${rung_steps}steps; [[ $rung_lr == 3e-5 ]] || name+=_lr$rung_lr
    for rung_seed in ${seeds//,/ }; do  # one seed a call: its CSV, anchors_1200_bellm_<name>_<sizes>_seed<s>.csv
      seeds=$rung_seed suffix=_seed$rung_seed curve bellm "$name" "${data[@]}" "${fixed[@]}"
    done
    ;;
  *) echo "anchors_curve.sh: dataset, encoder, encoder-search, lever, genre, weekly, bellm, bellm-fixed or" \
          "bellm-rung, not '$what'" >&2
     exit 2 ;;
esac
