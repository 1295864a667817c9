"""A frozen sentence encoder (the coherence ranker's `coherence.encoder`, the dataset checks' encoder) in float32
versus under bf16 autocast, the same texts in one run: texts/s of each, their ratio, and how far the unit vectors
move (cosine of each text's two vectors). Says what the encoder ranker would cost on a CPU with native bf16.

    .venv/bin/python -m benchmarks.encoder_precision [--encoder all-minilm-l6-v2] [--repeat 2]
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

from tasks.core.device import native_bf16, resolve_device  # noqa: E402
from tasks.core.sts_data import read_stsb  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", default="all-minilm-l6-v2", help="a registered name or a sentence-transformers folder")
    ap.add_argument("--repeat", type=int, default=2, help="STS-B dev's 3,000 sentences this many times")
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()
    from tasks.contracts import frozen_encode

    frame = read_stsb("dev")
    texts = (frame["s1"].tolist() + frame["s2"].tolist()) * args.repeat
    print(f"{len(texts)} texts, batch {args.batch}, torch threads {torch.get_num_threads()}, bf16 native on "
          f"{resolve_device('auto')}: {native_bf16(resolve_device('auto'))}")

    def run(precision: str) -> tuple[np.ndarray, float]:  # the product path: the ranker's own encoding
        started = time.perf_counter()
        vectors = frozen_encode(args.encoder, texts, batch_size=args.batch, precision=precision)
        return vectors, len(texts) / (time.perf_counter() - started)

    run("float32")  # warm-up: the encoder's load, first-call allocations and oneDNN kernels
    f32, f32_rate = run("float32")
    b16, b16_rate = run("bfloat16")
    agreement = (f32 * b16).sum(1)
    print(f"float32 {f32_rate:.0f} texts/s | bf16 autocast {b16_rate:.0f} texts/s | ratio {b16_rate / f32_rate:.2f}×")
    print(f"cosine(float32, bf16) per text: min {agreement.min():.4f}, mean {agreement.mean():.5f}")


if __name__ == "__main__":
    main()
