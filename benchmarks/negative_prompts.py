"""Stage-1 prompt variants side by side on the same positives (issue 34): STS-pattern negatives (W(cosine) of s⁻
against STS-B's low band, and how many candidates the negative band lets through) and intermediates (how many only
delete words, W(cosine) against STS-B's 1–4 band).

For each of the first `--n` complete triples of a run, every variant — a template version, the examples it shows
and, optionally, the base it derives from: `v3:band`, `v1:deletion` or `v1:deletion:anchor` (the run's own examples,
or the pattern band's deletion-shaped pairs: tasks/generate/patterns.band_candidates; the base s⁺ unless `:anchor`)
— is asked for `--candidates` choices of the kind from that triple's base (the stage's request: examples in the
system message, the base as the user message, its sampling settings).
Stage 1's rules and best-of-N choice are then applied to each variant's candidates: the rule pass rate (validate()
with the run's settings, the negative band's ceiling for negatives), slots left with no candidate (each costs the
stage another request), the chosen generation's cosine to the anchor and its W(cosine) against the STS-B dev band
the pattern report measures; for intermediates also the chosen ones that add no word to their base or the anchor
(not_deletion, allowance 0) and those that add none to the anchor (the reading's criterion: the anchor with some
detail left out).

    ./stsgen llm-server --port 8080 &   # or any OpenAI-compatible endpoint
    .venv/bin/python -m benchmarks.negative_prompts data/outputs/issue34/r200 --base-url http://127.0.0.1:8080/v1 \\
        --kind negative --variants v2:band v3:band --n 40

A triples parquet instead of a run folder takes stage 1's defaults (seed, rules, the pattern source's examples and
cosine targets); `--runs DIR` writes each variant's chosen generations into the triples as a folder of its own, for
benchmarks/blind_reading.py to read two of them blind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.blind_reading import SLOTS
from tasks.contracts import read_triples
from tasks.core.sts_data import read_stsb
from tasks.generate.candidates import rank
from tasks.generate.patterns import load_pattern_source, sample_examples
from tasks.generate.settings import GenerateSettings, PatternSettings, ValidationSettings
from tasks.generate.stage import chooser_of
from tasks.generate.validation import added_words, validate
from tasks.llm.local_models import load_encoder
from tasks.llm.prompting import load_template
from tasks.report.pattern_report import pattern_distances, pattern_measures, relation_pairs


async def candidates_of(base_url: str, model: str, messages: list[list[dict]], n: int, seed: int,
                        temperature: float, concurrency: int) -> list[list[str]]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="none", timeout=600)
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, msgs: list[dict]) -> list[str]:
        async with gate:
            response = await client.chat.completions.create(model=model, messages=msgs, n=n, seed=seed + i,
                                                            temperature=temperature, top_p=0.95, max_tokens=64)
            return [(c.message.content or "").strip() for c in response.choices]

    return await asyncio.gather(*(one(i, m) for i, m in enumerate(messages)))


def run_inputs(run: Path, kind: str) -> tuple[int, pd.DataFrame, float, ValidationSettings, PatternSettings, list]:
    """(seed, triples indexed by source_id, the pattern's cosine target of `kind`, the rules, the pattern settings,
    the run's examples of `kind`): a run folder's own (its manifest), or stage 1's defaults for a triples file."""
    if run.is_file():
        cfg = GenerateSettings()
        patterns = load_pattern_source(cfg.pattern)
        examples = [vars(p) for p in sample_examples(patterns, (kind,), cfg.pattern.examples_per_prompt, cfg.seed,
                                                     cfg.pattern.intermediate_examples)[kind]]
        return (cfg.seed, pd.read_parquet(run).set_index("source_id"), dict(chooser_of(cfg, patterns).targets)[kind],
                cfg.validation, cfg.pattern, examples)
    manifest = json.loads((run / "generate-sts-triples" / "manifest.json").read_text())
    seed = manifest["seed"] if isinstance(manifest["seed"], int) else 13
    triples = read_triples(run / "generate-sts-triples" / "triples.parquet").set_index("source_id")
    return (seed, triples, manifest["best_of_n"]["pattern_cosine_targets"][kind],
            ValidationSettings(**manifest["parameters"]["validation"]), PatternSettings(**manifest["parameters"]["pattern"]),
            manifest["examples"][kind])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a run folder with generate-sts-triples/{triples.parquet,manifest.json}, "
                    "or a triples parquet (source_id, anchor, positive, intermediate, negative): stage 1's defaults")
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--kind", choices=["negative", "intermediate"], default="negative")
    ap.add_argument("--variants", nargs="+", default=["v2:band"], help="template version:examples (band|deletion)[:base (positive|anchor)]")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--skip", type=int, default=0, help="start at this triple (a sample not chosen on)")
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--deletion-allowance", type=int, nargs="*", default=[],
                    help="intermediates: also score each variant's candidates with not_deletion at these allowances")
    ap.add_argument("--runs", type=Path, help="write each variant's chosen ones as a triples folder here")
    ap.add_argument("--show", type=int, default=0, help="print this many chosen generations per variant")
    args = ap.parse_args()

    seed, triples, target, validation, pattern, run_examples = run_inputs(args.run, args.kind)
    triples = triples.iloc[args.skip: args.skip + args.n]
    ceiling = validation.negative_max_cosine if args.kind == "negative" else None
    model = load_encoder("all-minilm-l6-v2")
    encode = lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True)  # noqa: E731

    stsb = read_stsb("dev")

    def distance(anchors: list[str], chosen: list[str]) -> dict:
        """The report stage's measure (its STS-B band, its cosine, its Wasserstein distance) of the chosen ones."""
        frame = pd.DataFrame({"anchor": anchors, args.kind: chosen})
        return pattern_distances(pattern_measures(relation_pairs(frame, stsb), encode))[args.kind]

    reference = distance(triples["anchor"].tolist(), triples[args.kind].tolist())
    patterns = load_pattern_source(pattern)

    print(f"{args.kind}: {len(triples)} positives of {args.run} (from #{args.skip}); target cosine {target}; "
          f"ceiling {ceiling}; STS-B dev's band: {reference['stsb_pairs']} pairs, mean cosine "
          f"{reference['stsb_cosine_mean']:.3f}; the run's own: W(cosine) {reference['cosine_wasserstein']:.3f}\n")
    print("| variant | candidates | pass rules | pass band | slots with none | chosen mean cos | W(cosine) | "
          "chosen deletion-only | of the anchor |\n|---|---|---|---|---|---|---|---|---|")
    shown = {}
    for variant in args.variants:
        version, shape, base_kind = (variant.split(":") + ["positive"])[:3]
        bases = triples[base_kind].tolist()
        template = load_template("sts", args.kind, version)
        examples = run_examples if shape == "band" else [
            vars(p) for p in sample_examples(patterns, (args.kind,), len(run_examples), seed, "deletion")[args.kind]]
        system = template.system_message(examples)
        example_texts = tuple(t for e in examples for t in (e["sentence1"], e["sentence2"]))
        outs = asyncio.run(candidates_of(args.base_url, args.model,
                                         [template.messages(system, b) for b in bases],
                                         args.candidates, seed, args.temperature, args.concurrency))
        for allowance in [validation.deletion_allowance, *args.deletion_allowance]:
            rules = validation.model_copy(update={"deletion_allowance": allowance})
            label = variant if allowance == validation.deletion_allowance else f"{variant} not_deletion≤{allowance}"
            total = passed_rules = passed_band = empty = deletion = of_anchor = 0
            chosen_cos, chosen, kept = [], [], {}
            for row, base, cands in zip(triples.itertuples(), bases, outs):
                total += len(cands)
                siblings = (row.positive,) if args.kind == "intermediate" else (row.positive, row.intermediate)
                ok = [c for c in cands if validate(c, kind=args.kind, base=base, anchor=row.anchor,
                                                   siblings=siblings, examples=example_texts, settings=rules).ok]
                passed_rules += len(ok)
                if not ok:
                    empty += 1
                    continue
                order, cosines = rank(args.kind, row.anchor, ok, encode, "farthest", target)
                inside = [i for i in order if ceiling is None or cosines[i] < ceiling]
                passed_band += len(inside)
                if not inside:
                    empty += 1
                    continue
                text = ok[inside[0]]
                kept[row.Index] = text
                chosen_cos.append(cosines[inside[0]])
                chosen.append((row.anchor, row.positive, text, cosines[inside[0]]))
                deletion += min(len(added_words(text, base)), len(added_words(text, row.anchor))) == 0
                of_anchor += not added_words(text, row.anchor)
            w = distance([r[0] for r in chosen], [r[2] for r in chosen])["cosine_wasserstein"] if chosen else float("nan")
            print(f"| {label} | {total} | {passed_rules / total:.2f} | {passed_band / total:.2f} | "
                  f"{empty}/{len(triples)} | {np.mean(chosen_cos):.3f} | {w:.3f} | "
                  f"{deletion}/{len(chosen)} | {of_anchor}/{len(chosen)} |", flush=True)
            shown[label] = (examples, chosen[: args.show])
            if args.runs:  # the variant's triples, the kind replaced: benchmarks.blind_reading reads two of them
                folder = args.runs / label.replace(":", "-").replace(" ", "_").replace("≤", "le")
                folder.mkdir(parents=True, exist_ok=True)
                out = triples.loc[list(kept)].assign(**{args.kind: list(kept.values())})
                out.reset_index()[["source_id", *SLOTS]].to_parquet(folder / "triples.parquet", index=False)
    for variant, (examples, rows) in shown.items():
        if not rows:
            continue
        print(f"\n## {variant}: examples " + " · ".join(f"{e['sentence1']} → {e['sentence2']}" for e in examples))
        for anchor, positive, text, cos in rows:
            print(f"[{cos:.2f}] a: {anchor}\n       +: {positive}\n       {args.kind[0]}: {text}")


if __name__ == "__main__":
    main()
