"""Generation-side levers for stage 1, side by side on the same anchors, before any judge: one sample vs best of N
(one request, `n` choices) chosen by facts and encoder cosine, for positives; base sentence, prompt and choice rule for
STS negatives, measured by the pattern distances against STS-B dev.

    .venv/bin/python -m benchmarks.best_of_n positives --base-url http://127.0.0.1:8093/v1 --out /tmp/pos.csv
    .venv/bin/python -m benchmarks.best_of_n negatives --base-url http://127.0.0.1:8093/v1 --out /tmp/neg.csv

The anchors are those of benchmarks/data/verifier_generations.csv (30 per kind, their first-attempt generations
already judged by reading), so a variant's outputs are read against the same anchors as the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import wasserstein_distance

from tasks.core.config import LLMSettings
from tasks.core.sts_data import read_stsb
from tasks.generate.candidates import choose
from tasks.generate.facts import check_facts, facts
from tasks.generate.patterns import load_pattern_source, sample_examples
from tasks.generate.settings import PatternSettings
from tasks.generate.validation import validate
from tasks.llm.client import LLMClient
from tasks.llm.prompting import load_template
from tasks.report.pattern_report import RELATIONS, match_error_rates

LABELED = Path("benchmarks/data/verifier_generations.csv")


def fact_request(text: str) -> str:
    """The tried-and-dropped variant: the anchor's facts listed in the positive's request (worse by reading)."""
    found = sorted(facts(text))
    return text if not found else f"{text}\n\n(Keep: {', '.join(found)})"


def encoder():
    from sentence_transformers import SentenceTransformer

    from tasks.llm.local_models import encoder_folder

    model = SentenceTransformer(str(encoder_folder("all-minilm-l6-v2")), device="cpu")
    return lambda texts: model.encode(list(texts), batch_size=64, convert_to_numpy=True, normalize_embeddings=True)


async def sample(client: LLMClient, messages_list, n: int, temperature: float, seed: int) -> list[list[str]]:
    params = {"temperature": temperature, "top_p": 0.95, "max_tokens": 64, "seed": seed, "n": n}
    async with client.open() as call:
        results = await asyncio.gather(*(call(m, params) for m in messages_list))
    return [r.texts or [r.text or ""] if r.ok else [] for r in results]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["positives", "negatives"])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--template-version", default="v1")
    ap.add_argument("--base", choices=["anchor", "positive"], default="positive", help="negatives: derived from")
    ap.add_argument("--keep-facts", action="store_true", help="positives: the anchor's facts listed in the request")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    llm = LLMSettings(base_url=args.base_url, model=args.model, max_concurrency=4)
    client = LLMClient(llm)
    kind = "positive" if args.what == "positives" else "negative"
    rows = pd.read_csv(LABELED)
    rows = rows[rows["kind"] == kind].reset_index(drop=True)
    template = load_template("sts", kind, args.template_version)
    examples = sample_examples(load_pattern_source(PatternSettings()), (kind,), 3, 13)[kind]
    system = template.system_message([vars(e) for e in examples])
    bases = rows["anchor"] if kind == "positive" or args.base == "anchor" else rows["base"]
    messages = [template.messages(system, b) for b in bases]
    if args.keep_facts:
        messages = [template.messages(system, fact_request(b)) for b in bases]
    texts = asyncio.run(sample(client, messages, args.n, args.temperature, 13))
    encode = encoder()
    out = []
    for i, r in rows.iterrows():
        cands = [t.strip() for t in texts[i]]
        valid = [t for t in cands if validate(t, kind=kind, base=bases[i], anchor=r["anchor"]).ok]
        first = cands[0] if cands else ""
        best = choose(kind, r["anchor"], valid, encode)[0] if valid else ""
        out.append({"anchor": r["anchor"], "base": bases[i], "baseline": r["candidate"], "baseline_human": r["human"],
                    "first": first, "best": best, "valid": len(valid), "received": len(cands),
                    "best_facts": ";".join(check_facts(r["anchor"], best).dropped + check_facts(r["anchor"], best).added)
                    if best else ""})
    df = pd.DataFrame(out)
    for col in ("baseline", "first", "best"):
        texts_col = df[col].fillna("").tolist()
        e_a, e_c = encode(df["anchor"].tolist()), encode([t or "." for t in texts_col])
        df[f"cos_{col}"] = np.sum(e_a * e_c, axis=1)
        errs = [check_facts(a, t).errors if t else np.nan for a, t in zip(df["anchor"], texts_col)]
        print(f"{col:9s} cosine to anchor mean {df[f'cos_{col}'].mean():.3f}  fact errors mean {np.nanmean(errs):.2f}"
              f"  with none {np.mean([e == 0 for e in errs]):.2f}")
    band = read_stsb("dev")
    low, high = RELATIONS[kind]
    band = band[(band["gold"] > low) & (band["gold"] < high)]
    ref_cos = np.sum(encode(band["s1"].tolist()) * encode(band["s2"].tolist()), axis=1)
    ref_mer = match_error_rates(band["s1"].tolist(), band["s2"].tolist())
    for col in ("baseline", "first", "best"):
        ok = df[col].fillna("") != ""
        mer = match_error_rates(df.loc[ok, "anchor"].tolist(), df.loc[ok, col].tolist())
        print(f"{col:9s} vs STS-B dev {kind} band ({len(band)} pairs): W(cosine) "
              f"{wasserstein_distance(df.loc[ok, f'cos_{col}'], ref_cos):.3f}, W(MER) {wasserstein_distance(mer, ref_mer):.3f}"
              f" (MER mean {mer.mean():.3f} vs {ref_mer.mean():.3f}; cosine STS-B {ref_cos.mean():.3f})")
    print(f"requests {client.stats.requests_sent}, completion tokens {client.stats.completion_tokens}, "
          f"choices received mean {df['received'].mean():.1f}, valid mean {df['valid'].mean():.1f}")
    df.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
