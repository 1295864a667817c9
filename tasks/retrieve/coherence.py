"""Train (or reuse) the coherence model on a corpus, and score candidate contexts with cached encodings.

Training data from the corpus itself (Sun et al. 2022): real (c<, s, c>) windows are positives; negatives replace the
centre with another sentence of the same document (half) or a random corpus sentence (half). Documents are split
into train / held-out so the reported accuracy and ROC AUC are on unseen documents.

A trained model lives in `$STSGEN_HOME/coherence/<key>/` (model.pt, vocab.json, manifest.json) where key hashes the
corpus content and the training parameters: the same corpus and parameters reuse it.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from models.coherence import CoherenceModel, EncoderHeadCoherence, Vocab
from models.coherence_training import coherence_metrics, coherence_probabilities, train_coherence, word2vec_init
from tasks.contracts import TrainedCoherence, frozen_encode, load_trained
from tasks.core.config import key_fields, stsgen_home
from tasks.core.device import device_info, resolve_device, resolve_lm_dtype
from tasks.core.store import (
    atomic_write_bytes,
    fingerprint,
    sha256_path,
    write_json,
    write_manifest,
)
from tasks.llm.local_models import encoder_identity
from tasks.retrieve.settings import CoherenceSettings

CODE_VERSION = "bilstm-coherence-v1"


def training_examples(contexts: pd.DataFrame, sentences: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """n positives and n negatives (half same-document, half random replacements), vectorized."""
    rng = np.random.default_rng(seed)
    pos = contexts.iloc[rng.permutation(len(contexts))[: min(n, len(contexts))]].reset_index(drop=True)
    # Same-document replacement: another position of the same document, chosen via sorted doc offsets.
    sents = sentences.sort_values(["doc_id", "position"], kind="stable").reset_index(drop=True)
    starts = sents.groupby("doc_id", sort=False).indices
    doc_first = {d: (idx[0], len(idx)) for d, idx in starts.items()}
    first = np.array([doc_first[d][0] for d in pos["doc_id"]])
    size = np.array([doc_first[d][1] for d in pos["doc_id"]])
    own = first + pos["position"].to_numpy()
    offset = rng.integers(1, np.maximum(size, 2))
    same_doc = first + (own - first + offset) % np.maximum(size, 1)
    random_any = rng.integers(0, len(sents), size=len(pos))
    use_same = rng.random(len(pos)) < 0.5
    replacement = np.where(use_same, same_doc, random_any)
    texts = sents["text"].to_numpy()
    neg = pos.copy()
    neg["centre"] = texts[replacement]
    neg = neg[neg["centre"].to_numpy() != pos["centre"].to_numpy()]  # a replacement equal to the original is no negative
    out = pd.concat([pos.assign(label=1, negative_kind="none"),
                     neg.assign(label=0, negative_kind=np.where(use_same, "same_document", "random")[neg.index])])
    return out.reset_index(drop=True)


def model_key(corpus_key: str, settings: CoherenceSettings, window_k: int) -> str:
    parts = {"corpus": corpus_key, "settings": key_fields(settings.resolved()), "k": window_k, "code": CODE_VERSION}
    if settings.frozen_encoder:  # the encoder by its files' content, whatever its name or path
        parts["encoder_sha256"] = encoder_identity(settings.frozen_encoder)[1]
    return fingerprint(parts)


def heldout_metrics(model, vocab, examples: pd.DataFrame, max_len: int) -> dict:
    """Accuracy and ROC AUC of `training_examples` rows, and the AUC against each kind of negative (same-document,
    random replacement): every window scored once."""
    p = coherence_probabilities(model, vocab, examples["left"].tolist(), examples["centre"].tolist(),
                                examples["right"].tolist(), max_len=max_len)
    return metrics_by_negative_kind(p, examples)


def metrics_by_negative_kind(p: np.ndarray, examples: pd.DataFrame) -> dict:
    """Accuracy and ROC AUC of probabilities p for `training_examples` rows, overall and per kind of negative."""
    label = examples["label"].to_numpy()
    metrics = coherence_metrics(p, label)
    for kind in ("same_document", "random"):
        part = (label == 1) | (examples["negative_kind"] == kind).to_numpy()
        metrics[f"roc_auc_{kind}"] = coherence_metrics(p[part], label[part])["roc_auc"]
    return metrics


def split_examples(contexts: pd.DataFrame, sentences: pd.DataFrame, settings: CoherenceSettings
                   ) -> tuple[pd.DataFrame, pd.DataFrame, set]:
    """(training examples, held-out examples, held-out documents): documents split first, so the held-out examples
    come from documents training never saw. The same split for every model of these settings (benchmarks compare
    encoders on it)."""
    docs = contexts["doc_id"].unique()
    rng = np.random.default_rng(settings.seed)
    heldout_docs = set(rng.permutation(docs)[: max(1, int(len(docs) * settings.heldout_fraction))])
    is_held = contexts["doc_id"].isin(heldout_docs)
    n_train = settings.train_contexts
    n_held = max(50, int(n_train * settings.heldout_fraction))
    train = training_examples(contexts[~is_held], sentences, n_train, settings.seed)
    held = training_examples(contexts[is_held], sentences, n_held, settings.seed + 1)
    return train, held, heldout_docs


def train_or_load(contexts: pd.DataFrame, sentences: pd.DataFrame, corpus_key: str, settings: CoherenceSettings,
                  window_k: int, root: Path | None = None, progress=None) -> TrainedCoherence:
    settings = settings.resolved()  # the training size concrete in the key and the manifest
    device = resolve_device(settings.device)  # where the BiLSTM trains or the frozen encoder encodes
    if settings.frozen_encoder:  # 'auto' made concrete before the key: a float32 and a bf16 machine fit two heads
        settings = settings.model_copy(update={"precision": resolve_lm_dtype(settings.precision, device)})
    key = model_key(corpus_key, settings, window_k)
    folder = (root or stsgen_home() / "coherence") / key[:32]
    existing = load_trained(folder)
    if existing is not None:
        return existing
    if settings.frozen_encoder:
        return _fit_encoder_head(contexts, sentences, settings, corpus_key, key, window_k, folder, device)
    torch.manual_seed(settings.seed)
    train, held, heldout_docs = split_examples(contexts, sentences, settings)
    vocab = Vocab.build(pd.concat([train["left"], train["centre"], train["right"]]), max_size=settings.vocab_size)
    model = CoherenceModel(len(vocab), settings.embedding_dim, settings.hidden)
    # word2vec sees the training documents only: the held-out documents stay unseen, as the reported AUC says
    embeddings = word2vec_init(model, vocab, sentences.loc[~sentences["doc_id"].isin(heldout_docs), "text"],
                               epochs=settings.word2vec_epochs, seed=settings.seed) if settings.word2vec_epochs \
        else None
    training = train_coherence(model, vocab, train["left"].tolist(), train["centre"].tolist(),
                               train["right"].tolist(), train["label"].tolist(), epochs=settings.epochs,
                               batch_size=settings.batch_size, lr=settings.lr, max_len=settings.max_len,
                               seed=settings.seed, progress=progress, device=device)
    metrics = {"heldout": heldout_metrics(model, vocab, held, settings.max_len),
               "train": training | {"device": device_info(device)}, "train_examples": len(train), "heldout_documents": len(heldout_docs),
               "word2vec": embeddings,
               "vocab_size": len(vocab)}
    _save(folder, model, vocab, heldout_docs, {"key": key, "corpus_key": corpus_key, "settings": settings.model_dump(),
                                               "window_k": window_k, "code_version": CODE_VERSION, "metrics": metrics})
    return TrainedCoherence(model, vocab, folder, metrics, key, reused=False)


def _save(folder: Path, model, vocab: Vocab, heldout_docs: set, manifest: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model.to("cpu")  # saved and shared as a CPU model; a stage that ranks on a GPU moves it there
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    atomic_write_bytes(folder / "model.pt", buffer.getvalue())
    outputs = {"model.pt": sha256_path(folder / "model.pt"),
               "vocab.json": write_json(folder / "vocab.json", vocab.tokens),
               # Evaluations on corpus sentences (benchmarks/retrieval.py) draw queries from these documents only.
               "heldout_docs.json": write_json(folder / "heldout_docs.json", sorted(map(str, heldout_docs)))}
    write_manifest(folder, manifest, outputs)
    model.eval()


def encoder_source(encoder: str) -> str:
    """How the manifest names the encoder for stage 3 to load it again: a registered name as it is, a folder as its
    absolute path (a relative one would not resolve from another working directory)."""
    return str(Path(encoder).resolve()) if Path(encoder).exists() else encoder


WINDOW_PARTS = ("left", "centre", "right")


def encoded_windows(encoder: str, frames: list[pd.DataFrame], precision: str = "float32", device: str | None = None):
    """Encode every distinct c<, s, c> text of the `training_examples` frames once with a frozen sentence encoder;
    returns parts(frame) → its (left, centre, right) unit vectors, and how many texts were encoded."""
    texts = pd.Index(pd.unique(pd.concat([f[c] for f in frames for c in WINDOW_PARTS])))
    vectors = frozen_encode(encoder, texts.tolist(), precision=precision, device=device)

    def parts(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple(vectors[texts.get_indexer(frame[c])] for c in WINDOW_PARTS)

    return parts, len(texts)


def neighbour_cosines(parts, frame: pd.DataFrame) -> np.ndarray:
    """(n, 2): the encoder's cosine of each example's s to its c< and to its c> (unit vectors: dot products)."""
    left, centre, right = parts(frame)
    return np.stack([(left * centre).sum(1), (centre * right).sum(1)], axis=1)


def _fit_encoder_head(contexts: pd.DataFrame, sentences: pd.DataFrame, settings: CoherenceSettings, corpus_key: str,
                      key: str, window_k: int, folder: Path, device) -> TrainedCoherence:
    """The head over a frozen sentence encoder (`settings.encoder`): logistic regression (scikit-learn; a convex fit,
    no training loop of ours) on the encoder's cosine of s to c< and of s to c>, written into the head's c<⊙s and
    s⊙c> weights, so ranking stays two matrix-vector products. Why two weights and not the head's 5·D: over the
    default corpus's 120k examples the full head scored no better (held-out ROC AUC 0.791 vs 0.794 for the plain sum
    of the two cosines, benchmarks/coherence.py), and on small corpora its 1,920 weights underfit under the L2
    penalty. Fit on the examples the BiLSTM would train on, scored on the same held-out documents; every distinct
    text is encoded once."""
    from sklearn.linear_model import LogisticRegression

    train, held, heldout_docs = split_examples(contexts, sentences, settings)
    sha256 = encoder_identity(settings.frozen_encoder)[1]
    started = time.perf_counter()
    parts, n_texts = encoded_windows(settings.frozen_encoder, [train, held], settings.precision, str(device))
    encode_s = time.perf_counter() - started
    fit = LogisticRegression().fit(neighbour_cosines(parts, train), train["label"].to_numpy())
    dim = parts(held)[0].shape[1]
    model = EncoderHeadCoherence(dim)
    weight = torch.zeros(1, 5 * dim)
    weight[0, 3 * dim : 4 * dim], weight[0, 4 * dim :] = float(fit.coef_[0, 0]), float(fit.coef_[0, 1])
    with torch.no_grad():
        model.head.weight.copy_(weight)
        model.head.bias.fill_(float(fit.intercept_[0]))
    metrics = {"heldout": metrics_by_negative_kind(fit.predict_proba(neighbour_cosines(parts, held))[:, 1], held),
               "train": {"encode_seconds": round(encode_s, 2), "texts_encoded": n_texts, "device": device_info(device),
                         "train_seconds": round(time.perf_counter() - started - encode_s, 2),
                         "weights": {"cos_left": round(float(fit.coef_[0, 0]), 6),
                                     "cos_right": round(float(fit.coef_[0, 1]), 6),
                                     "bias": round(float(fit.intercept_[0]), 6)}},
               "train_examples": len(train), "heldout_documents": len(heldout_docs)}
    _save(folder, model, Vocab([]), heldout_docs, {
        "key": key, "corpus_key": corpus_key, "settings": settings.model_dump(), "window_k": window_k,
        "code_version": CODE_VERSION, "metrics": metrics,
        "encoder": {"source": encoder_source(settings.frozen_encoder), "sha256": sha256, "dim": int(dim),
                    "precision": settings.precision}})
    return TrainedCoherence(model, Vocab([]), folder, metrics, key, reused=False,
                            encoder=encoder_source(settings.frozen_encoder), encoder_precision=settings.precision)
