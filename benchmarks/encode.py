"""Encoding speed of a trained surrogate: the reference loop's encoder (`benchmarks.reference_loop.encode`, length-sorted batches) versus
sentence-transformers encoding the same sentences with the same weights, in one run; the embeddings must agree.

    .venv/bin/python -m benchmarks.encode [--model data/outputs/latest/train-surrogate/model] [--sentences 3000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.reference_loop import encode  # noqa: E402
from tasks.core.sts_data import read_stsb  # noqa: E402
from tasks.train.backbones import BackboneSettings, load_backbone  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="data/outputs/latest/train-surrogate/model",
                    help="a sentence-transformers folder (ours, or all-minilm-l6-v2 for the stock model)")
    ap.add_argument("--sentences", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    from sentence_transformers import SentenceTransformer

    from tasks.llm.local_models import encoder_folder

    folder = encoder_folder(args.model)
    frame = read_stsb("dev")
    sentences = (frame["s1"].tolist() + frame["s2"].tolist())[: args.sentences]
    ours, _ = load_backbone(BackboneSettings(kind="encoder", source=str(folder)))
    reference = SentenceTransformer(str(folder), device="cpu")
    encode(ours, sentences[:64], args.batch), reference.encode(sentences[:64])  # warm-up
    t = time.perf_counter()
    a = encode(ours, sentences, args.batch)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    b = reference.encode(sentences, batch_size=args.batch)
    t_ref = time.perf_counter() - t
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    print(f"{len(sentences)} STS-B dev sentences, batch {args.batch}, torch threads {torch.get_num_threads()}")
    print("| encoder | seconds | sentences/s |\n|---|---|---|")
    print(f"| sentence-transformers `encode` | {t_ref:.1f} | {len(sentences) / t_ref:.0f} |")
    print(f"| stsgen `encode` (same weights) | {t_ours:.1f} | {len(sentences) / t_ours:.0f} |")
    print(f"ratio stsgen / sentence-transformers: {t_ref / t_ours:.2f}x; min cosine between the two: {cos.min():.6f}")


if __name__ == "__main__":
    main()
