"""Recall of the labelled clause on the CUAD dev contracts: BM25, dense and hybrid, per model.

    .venv/bin/python bench/retrieval.py [--corpus ../shared/corpus] [--out bench/results]
        [--models minilm-l6,e5-small-q4] [--sentence-models minilm-l6] [--cache DIR]

The ten contracts are parsed and split as ingest does (the default model's tokenizer, 384-token
passages). For each CUAD field with a label, one question, the same for every contract, is ranked
against the contract's passages; a hit at k is a labelled passage (bench/_cuad_labels.py) among
the first k. Dense scores come from one vector per passage ("passage": the mean over its tokens)
or from one per sentence of it ("sentences": the best sentence's cosine, as LongDoc stores them;
for --sentence-models only, since it embeds every sentence). Then, for the best hybrid, the
evidence sentences of its top 3 passages: a hit is a sentence overlapping the labelled span.
Vectors are cached in --cache by model and text hash, so a second run only ranks.

Writes bench/results/retrieval.md and retrieval.json. Prints ids and counts only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _cuad_labels import Contract, load_contracts, locate, relevant_passages  # noqa: E402
from _embedders import NOT_RUN, Candidate, QuerySide, candidates  # noqa: E402
from _retrieval_report import hardware, write_report  # noqa: E402

from pipelines.retrieval.bm25 import PassageIndex  # noqa: E402
from pipelines.retrieval.evidence import DocumentSentences, sentence_evidence  # noqa: E402
from pipelines.retrieval.hybrid import Fusion, HybridIndex, fuse  # noqa: E402
from pipelines.vectors import PassageVectors, passage_segments  # noqa: E402
from worker.model.source import find_default_gguf  # noqa: E402
from worker.model.tokens import token_counter_for  # noqa: E402

# One generic question per CUAD field: the same words for every contract.
QUESTIONS = {
    "Document Name": "What is the title of this agreement?",
    "Parties": "Who are the parties to this agreement?",
    "Agreement Date": "What is the date of this agreement?",
    "Effective Date": "On what date does this agreement become effective?",
    "Expiration Date": "When does the term of this agreement expire?",
    "Renewal Term": "Does this agreement renew automatically, and for how long?",
    "Notice Period To Terminate Renewal": (
        "How much notice must a party give to prevent the agreement from renewing?"
    ),
    "Governing Law": "Which state's or country's law governs this agreement?",
}
FUSIONS = {
    "rrf": Fusion("rrf", 0.5),
    "rrf dense 0.3": Fusion("rrf", 0.3),
    "rrf dense 0.7": Fusion("rrf", 0.7),
    "blend dense 0.3": Fusion("blend", 0.3),
    "blend dense 0.5": Fusion("blend", 0.5),
    "blend dense 0.7": Fusion("blend", 0.7),
}
EVIDENCE_WEIGHTS = (0.3, 0.5, 0.7)
KS = (1, 3)


def _vectors(
    candidate: Candidate, contract: Contract, representation: str, cache: Path | None
) -> tuple[PassageVectors, float]:
    """The contract's passage vectors and the seconds they took (NaN: from the cache; no cache:
    always computed)."""
    texts = [p.text for p in contract.passages]
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = None if cache is None else cache / f"{candidate.key}-{representation}-{digest}.npz"
    if path is not None and path.exists():
        saved = np.load(path)
        return PassageVectors(saved["vectors"], saved["offsets"]), float("nan")
    started = time.perf_counter()
    if representation == "passage":
        vectors = PassageVectors.one_per_passage(candidate.embed_passages(texts))
    else:
        groups = [passage_segments(text) for text in texts]
        flat = candidate.embed_passages([segment for group in groups for segment in group])
        bounds = np.cumsum([0, *[len(group) for group in groups]])
        vectors = PassageVectors(flat, bounds)
    seconds = time.perf_counter() - started
    if path is not None:
        np.savez(path, vectors=vectors.vectors, offsets=vectors.offsets)
    return vectors, seconds


def _hits(order: np.ndarray, relevant: frozenset[int]) -> dict[int, bool]:
    return {k: any(int(i) in relevant for i in order[:k]) for k in KS}


def _rank_all(
    contracts: list[Contract], setups: list[tuple[Candidate, str]], cache: Path
) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """One row per (contract, field): hits per method; and each setup's embedding speed."""
    rows: list[dict[str, Any]] = []
    speed: dict[str, dict[str, float]] = {}
    vectors = {}
    # Speed, measured afresh on the contract nearest 25 pages (the target size).
    timed = min(contracts, key=lambda c: abs(len(c.pages) - 25))
    for candidate, representation in setups:
        setup = f"{candidate.key} {representation}"
        for contract in contracts:
            vectors[setup, contract.file], _ = _vectors(candidate, contract, representation, cache)
        started = time.perf_counter()
        _vectors(candidate, timed, representation, None)
        seconds = time.perf_counter() - started
        speed[setup] = {
            "contract": timed.file,
            "pages": len(timed.pages),
            "passages": len(timed.passages),
            "seconds": round(seconds, 1),
            "passages_per_s": round(len(timed.passages) / seconds, 2),
        }
        print(f"{setup}: vectors ready ({speed[setup]})")
    for contract in contracts:
        index = PassageIndex(contract.passages)
        for field, question in QUESTIONS.items():
            relevant, _, given = relevant_passages(contract, field)
            if not given or not relevant:
                continue
            bm25 = index.scores(question)
            row: dict[str, Any] = {"file": contract.file, "field": field}
            row["bm25"] = _hits(np.argsort(-bm25, kind="stable"), relevant)
            queries = {c.key: c.embed_queries([question])[0] for c, _ in setups}
            for candidate, representation in setups:
                setup = f"{candidate.key} {representation}"
                dense = vectors[setup, contract.file].scores(queries[candidate.key])
                row[f"{setup} dense"] = _hits(np.argsort(-dense, kind="stable"), relevant)
                for name, fusion in FUSIONS.items():
                    order = np.argsort(-fuse(bm25, dense, fusion), kind="stable")
                    row[f"{setup} {name}"] = _hits(order, relevant)
            rows.append(row)
    return rows, speed


def _evidence(
    contracts: list[Contract],
    candidate: Candidate,
    representation: str,
    fusion: Fusion,
    cache: Path,
) -> list[dict[str, Any]]:
    """Per (contract, field): does an evidence sentence of the top 3 hybrid passages overlap a
    labelled span, lexically and with the embedder at each weight; and is a labelled passage
    among those 3 at all (the ceiling)."""
    embedder = QuerySide(candidate)
    rows = []
    for contract in contracts:
        vectors, _ = _vectors(candidate, contract, representation, cache)
        index = HybridIndex(contract.passages, vectors, embedder, fusion=fusion)
        sentences = DocumentSentences(contract.pages)
        for field, question in QUESTIONS.items():
            spans = [locate(contract, label) for label in contract.labels.get(field, [])]
            spans = [span for span in spans if span is not None]
            if not spans:
                continue
            ranked = index.rank(question, 3)

            def hit(found: list, k: int, spans: list = spans) -> bool:
                return any(
                    e.start_char < s.end and s.start < e.end_char for e in found[:k] for s in spans
                )

            labelled = {o for span in spans for o in span.passage_ordinals}
            row: dict[str, Any] = {"file": contract.file, "field": field}
            row["passage in top 3"] = any(p.ordinal in labelled for p, _ in ranked)
            lexical = sentence_evidence(ranked, question, sentences, k=3)
            row["terms"] = {k: hit(lexical, k) for k in KS}
            for weight in EVIDENCE_WEIGHTS:
                found = sentence_evidence(
                    ranked, question, sentences, k=3, embedder=embedder, semantic_weight=weight
                )
                row[f"embedding {weight}"] = {k: hit(found, k) for k in KS}
            rows.append(row)
    return rows


def recall(rows: list[dict[str, Any]], method: str, field: str | None = None) -> dict[int, float]:
    chosen = [row for row in rows if field is None or row["field"] == field]
    return {k: sum(row[method][k] for row in chosen) / max(len(chosen), 1) for k in KS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--models", default="minilm-l6,e5-small-q4")
    parser.add_argument("--sentence-models", default="minilm-l6")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "longdoc-rb")
    parser.add_argument("--max-tokens", type=int, default=384)
    args = parser.parse_args()
    legal = args.corpus / "legal"
    if not legal.is_dir():
        sys.exit(f"No corpus at {legal}: pass --corpus.")
    args.cache.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    count_tokens = token_counter_for(find_default_gguf(), args.cache / "tokenizer")
    contracts = load_contracts(legal, count_tokens, args.max_tokens, list(QUESTIONS))
    models, skipped = candidates(args.models.split(","))
    for line in skipped:
        print(f"skipped {line}")
    per_sentence = set(args.sentence_models.split(","))
    setups = [(c, "passage") for c in models]
    setups += [(c, "sentences") for c in models if c.key in per_sentence]
    rows, speed = _rank_all(contracts, setups, args.cache)
    methods = [m for m in rows[0] if m not in ("file", "field")]
    # The pick: best recall@3, then @1, over every setup's hybrid variants.
    hybrid = [m for m in methods if any(m.endswith(f" {name}") for name in FUSIONS)]
    best = max(hybrid, key=lambda m: (recall(rows, m)[3], recall(rows, m)[1]))
    key, representation, fusion_name = best.split(" ", 2)
    chosen = next(c for c in models if c.key == key)
    evidence = _evidence(contracts, chosen, representation, FUSIONS[fusion_name], args.cache)
    results = {
        "hardware": hardware(load),
        "contracts": [
            {"file": c.file, "pages": len(c.pages), "passages": len(c.passages)} for c in contracts
        ],
        "questions": QUESTIONS,
        "models": {c.key: {"label": c.label, "runtime": c.runtime} for c in models},
        "skipped": skipped,
        "not_run": NOT_RUN,
        "speed": speed,
        "rows": rows,
        "best": best,
        "evidence_rows": evidence,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "retrieval.json").write_text(json.dumps(results, indent=1) + "\n")
    write_report(results, args.out / "retrieval.md", recall, list(QUESTIONS), methods)
    print(f"best hybrid: {best}; wrote {args.out / 'retrieval.md'}")


if __name__ == "__main__":
    main()
