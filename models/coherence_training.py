"""Training loop for the coherence model: binary cross-entropy on (c<, s, c>, label) examples.

Inputs: lists of texts `left`, `sent`, `right` and 0/1 `labels` (real triples vs triples whose centre was replaced).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from models.coherence import CoherenceModel, Vocab, pad_batch


def _batches(n: int, batch_size: int, rng: np.random.Generator | None):
    order = rng.permutation(n) if rng is not None else np.arange(n)
    for start in range(0, n, batch_size):
        yield order[start : start + batch_size]


def _model_inputs(vocab: Vocab, left, sent, right, idx, max_len: int, device: torch.device | None = None
                  ) -> list[torch.Tensor]:
    """(ids, lengths) for c<, s and c> of the examples `idx`, flattened in the model's argument order; ids on
    `device`, lengths on the CPU (sequence packing reads them there)."""
    out = []
    for texts in (left, sent, right):
        ids, lengths = pad_batch([vocab.encode(texts[i], max_len) for i in idx])
        out += [ids.to(device) if device is not None else ids, lengths]
    return out


def train_coherence(model: CoherenceModel, vocab: Vocab, left, sent, right, labels, *, epochs: int = 2,
                    batch_size: int = 128, lr: float = 1e-3, max_len: int = 64, seed: int = 13,
                    progress=None, device: torch.device | None = None) -> dict:
    """Train in place on `device` (default: where the model is); the BiLSTM runs in float32 everywhere."""
    device = device or next(model.parameters()).device
    model.to(device)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    y_all = torch.tensor(labels, dtype=torch.float32, device=device)
    history = []
    started = time.perf_counter()
    steps_total = epochs * ((len(labels) + batch_size - 1) // batch_size)
    step = 0
    for epoch in range(epochs):
        model.train()
        losses = []
        for idx in _batches(len(labels), batch_size, rng):
            logits = model(*_model_inputs(vocab, left, sent, right, idx, max_len, device))
            loss = loss_fn(logits, y_all[torch.as_tensor(idx, device=device)])
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            losses.append(loss.item())
            step += 1
            if progress:
                progress(step, steps_total)
        history.append({"epoch": epoch + 1, "loss": float(np.mean(losses))})
    return {"history": history, "train_seconds": round(time.perf_counter() - started, 2)}


@torch.no_grad()
def coherence_probabilities(model: CoherenceModel, vocab: Vocab, left, sent, right, *, batch_size: int = 256,
                            max_len: int = 64) -> np.ndarray:
    """P(coherent) of each (left, sentence, right) window."""
    model.eval()
    device = next(model.parameters()).device
    scores = []
    for idx in _batches(len(sent), batch_size, None):
        logits = model(*_model_inputs(vocab, left, sent, right, idx, max_len, device))
        scores.append(torch.sigmoid(logits).cpu().numpy())
    return np.concatenate(scores) if scores else np.zeros(0)


def coherence_metrics(p: np.ndarray, labels) -> dict:
    """Accuracy at 0.5 and ROC AUC of probabilities `p` against 0/1 labels."""
    y = np.asarray(labels)
    return {"accuracy": float(((p >= 0.5) == (y == 1)).mean()) if len(y) else float("nan"),
            "roc_auc": float(roc_auc_score(y, p)) if len(set(y.tolist())) == 2 else float("nan"),
            "examples": int(len(y))}



def word2vec_init(model: CoherenceModel, vocab: Vocab, texts, *, epochs: int = 3, seed: int = 13) -> dict:
    """Initialise the encoder's word embeddings with word2vec vectors trained on `texts` (the corpus's sentences,
    tokenised as the model tokenises): gensim's Word2Vec (skip-gram off: CBOW, window 5), not a loop of ours. A
    BiLSTM trained from random embeddings on ~10^5 windows learns little lexical similarity; vectors from the whole
    corpus give it that for free. Returns how many vocabulary entries got a vector, and the training time."""
    from gensim.models import Word2Vec

    from models.coherence import tokenize

    started = time.perf_counter()
    dim = model.encoder.embedding.embedding_dim
    # One worker: with several, gensim's threads take its 10k-word jobs in any order and the vectors differ from run
    # to run (gensim's FAQ on reproducibility); the model must be reproducible from its manifest.
    w2v = Word2Vec([tokenize(t) for t in texts], vector_size=dim, window=5, min_count=2, workers=1,
                   epochs=epochs, seed=seed)
    weight = model.encoder.embedding.weight.data
    found = [(i, w2v.wv.key_to_index[t]) for i, t in enumerate(vocab.tokens) if t in w2v.wv.key_to_index]
    if found:
        rows, keys = zip(*found)
        vectors = torch.as_tensor(w2v.wv.vectors[list(keys)], dtype=weight.dtype)
        weight[list(rows)] = vectors / vectors.norm(dim=1, keepdim=True).clamp_min(1e-6)  # unit length, as init
    return {"vectors": len(found), "vocab": len(vocab), "seconds": round(time.perf_counter() - started, 1)}
