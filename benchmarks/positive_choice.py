"""Which of a request's positives to keep: the chooser's rule today (fewest fact errors, then the highest
all-MiniLM-L6-v2 cosine to the anchor) against a rule by token alignment (fewest fact errors, then the highest
BERTScore-style minimum recall with all-mpnet-base-v2: the anchor token worst kept in the positive, best kept) —
the signal benchmarks/reader_signals.py found to separate every-fact-bad positives best on the developer readings
(AUC 0.76; 0.71 on the blind readings; MiniLM cosine 0.62 / 0.67).

The same requests stage 1 sends for a positive's first attempt (its template, its fixed examples, `n` choices,
its sampling and seed per source), to anchors of benchmarks/data/data_value_triples_405.parquet that no reading set
holds; stage 1's rules applied; both rules rank the same rule-passing choices. Where they keep different positives,
both are read blind (benchmarks/blind_reading.py on the two rules' triples folders: shuffled, which rule chose
which in a key apart).

    .venv/bin/python -m benchmarks.positive_choice --base-url http://127.0.0.1:8765/v1 --k 200 \
        --out benchmarks/results/positive_choice.csv --runs data/outputs/positive-choice
    .venv/bin/python -m benchmarks.blind_reading prepare --before data/outputs/positive-choice/cosine \
        --after data/outputs/positive-choice/alignment --k 0 --seed 7 --out benchmarks/data/blind_reading_34f.csv \
        --key benchmarks/data/blind_reading_34f.key.csv
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from benchmarks.reader_signals import DATA, OWN_READINGS, labeled, token_alignment  # noqa: E402
from tasks.core.config import LLMSettings  # noqa: E402
from tasks.core.defaults import DEFAULT_ENCODER  # noqa: E402
from tasks.generate.candidates import rank  # noqa: E402
from tasks.generate.facts import check_facts  # noqa: E402
from tasks.generate.generation import attempt_params, request_seed  # noqa: E402
from tasks.generate.patterns import load_pattern_source, sample_examples  # noqa: E402
from tasks.generate.settings import GenerateSettings  # noqa: E402
from tasks.generate.validation import prompt_example_sentences, validate  # noqa: E402
from tasks.llm.client import LLMClient  # noqa: E402
from tasks.llm.local_models import load_encoder  # noqa: E402
from tasks.llm.prompting import load_template  # noqa: E402
from tasks.llm.teacher import teacher_folder  # noqa: E402

TRIPLES = DATA / "data_value_triples_405.parquet"


def fresh_anchors(k: int, seed: int) -> pd.DataFrame:
    """k anchors of the 405-triple file that no labeled reading holds (this benchmark's own readings aside, so that a
    re-run draws the same anchors)."""
    triples = pd.read_parquet(TRIPLES)
    read = set(labeled(exclude=OWN_READINGS)["anchor"])
    return triples[~triples["anchor"].isin(read)].sample(k, random_state=seed).reset_index(drop=True)


async def ask(client: LLMClient, messages: list, params: list[dict]) -> list[list[str]]:
    async with client.open() as call:
        results = await asyncio.gather(*(call(m, p) for m, p in zip(messages, params)))
    return [[t.strip() for t in (r.texts or [r.text or ""])] if r.ok else [] for r in results]


def generate(anchors: pd.DataFrame, base_url: str, model: str) -> pd.DataFrame:
    """Each anchor's first-attempt positive request as stage 1 sends it; the choices that pass stage 1's rules."""
    cfg = GenerateSettings()
    template = load_template(cfg.pattern.kind, "positive")
    examples = sample_examples(load_pattern_source(cfg.pattern), ("positive",), cfg.pattern.examples_per_prompt,
                               cfg.seed, cfg.pattern.intermediate_examples)["positive"]
    system = template.system_message([vars(e) for e in examples])
    shown = prompt_example_sentences(template, examples)
    params = [attempt_params(cfg.sampling, request_seed(cfg.seed, sid, "positive", 0), 0) for sid in anchors["source_id"]]
    client = LLMClient(LLMSettings(base_url=base_url, model=model, max_concurrency=4))
    texts = asyncio.run(ask(client, [template.messages(system, a) for a in anchors["anchor"]], params))
    rows = []
    for (_, r), choices in zip(anchors.iterrows(), texts):
        valid = [t for t in choices if validate(t, kind="positive", base=r["anchor"], anchor=r["anchor"],
                                                examples=shown, settings=cfg.validation).ok]
        rows.append({"source_id": r["source_id"], "anchor": r["anchor"], "received": len(choices),
                     "valid": valid})
    print(f"requests {client.stats.requests_sent}, choices received {sum(r['received'] for r in rows)}, "
          f"rule-passing {sum(len(r['valid']) for r in rows)}")
    return pd.DataFrame(rows)


def choose_both(frame: pd.DataFrame) -> pd.DataFrame:
    """Each slot's kept positive under today's rule (`cosine`) and the token-alignment rule (`alignment`)."""
    minilm, mpnet = load_encoder(DEFAULT_ENCODER), load_encoder(str(teacher_folder()))
    encode = lambda texts: minilm.encode(texts, batch_size=32, convert_to_numpy=True)  # noqa: E731
    slots = frame[frame["valid"].map(len) > 0]
    pairs = [(r["anchor"], c) for _, r in slots.iterrows() for c in r["valid"]]  # every slot's choices, one encode
    recall = iter(s["mpnet_tok_recall_min"] for s in token_alignment(mpnet, *map(list, zip(*pairs))))
    out = []
    for _, r in slots.iterrows():
        valid = list(r["valid"])
        today = valid[rank("positive", r["anchor"], valid, encode)[0][0]]
        errors = [check_facts(r["anchor"], c).errors for c in valid]
        scores = [next(recall) for _ in valid]
        aligned = valid[min(range(len(valid)), key=lambda i: (errors[i], -scores[i], i))]
        out.append({"source_id": r["source_id"], "anchor": r["anchor"], "valid": len(valid), "cosine": today,
                    "alignment": aligned})
    return pd.DataFrame(out)


def write_runs(chosen: pd.DataFrame, out_dir: Path) -> None:
    """Two triples folders with the same intermediates and negatives (the 405-triple file's), the positive of each
    rule: `benchmarks.blind_reading prepare --before OUT/cosine --after OUT/alignment --k 0` reads the positives the
    rules chose differently, shuffled, with which is which in a key apart."""
    triples = pd.read_parquet(TRIPLES).set_index("source_id")
    for rule in ("cosine", "alignment"):
        frame = triples.loc[chosen["source_id"]].reset_index()
        frame["positive"] = chosen[rule].to_numpy()
        (out_dir / rule).mkdir(parents=True, exist_ok=True)
        frame.to_parquet(out_dir / rule / "triples.parquet", index=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--k", type=int, default=80)
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--out", type=Path, required=True, help="the chosen positives (CSV)")
    parser.add_argument("--runs", type=Path, help="write the two rules' triples folders here (write_runs)")
    parser.add_argument("--from-csv", action="store_true", help="read --out of an earlier run: nothing is asked")
    args = parser.parse_args(argv)
    if args.from_csv:
        chosen = pd.read_csv(args.out)
    else:
        chosen = choose_both(generate(fresh_anchors(args.k, args.seed), args.base_url, args.model))
        chosen.to_csv(args.out, index=False)
    differ = (chosen["cosine"] != chosen["alignment"]).sum()
    print(f"{len(chosen)} slots with a rule-passing positive; the two rules keep different ones in {differ} "
          f"({differ / max(len(chosen), 1):.0%})")
    if args.runs:
        write_runs(chosen, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
