"""Key facts of the dev corpus's opinions, drug labels and contracts with the real default model,
one document after another in this process: each field's value, page, source and origin, for a
person to check against the PDFs (there are no labels for opinions and labels).

    PYTHONPATH=$PWD .venv/bin/python bench/key_facts.py [--corpus ../shared/corpus]
        [--only opinion|label|contract] [--json out.json] [--cache-dir /tmp/longdoc-model-cache]

Documents are parsed and split as ingest does (the model's tokenizer, the passage size of the
settings); retrieval is BM25, as the facts job has it. Prints values only to the terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GROUPS = {
    "opinion": ("legal", "court_*.pdf"),
    "label": ("medical", "fda_*.pdf"),
    "contract": ("legal", "cuad_train_*.pdf"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--only", choices=sorted(GROUPS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/longdoc-model-cache"))
    args = parser.parse_args()
    os.environ.setdefault("LONGDOC_ENGINE_DEVICE", "cpu")
    os.environ["LONGDOC_MODEL_CACHE_DIR"] = str(args.cache_dir)

    from pipelines.facts.extract import extract_facts
    from pipelines.ingest.classify import guess_kind
    from pipelines.ingest.parse import parse_pdf_in_process
    from pipelines.ingest.split import split_into_passages
    from pipelines.inputs import DocumentInput
    from worker import resources
    from worker.model import engine_holder

    settings = resources.settings()
    count_tokens = resources.count_tokens()
    model = engine_holder.get_chat_model(settings)
    model.complete([{"role": "user", "content": "Say yes."}], max_new_tokens=2)
    results = {}
    if not (args.corpus / "legal").is_dir():
        raise SystemExit(f"no corpus at {args.corpus}: pass --corpus")
    for group, (folder, pattern) in GROUPS.items():
        if args.only and group != args.only:
            continue
        for path in sorted((args.corpus / folder).glob(pattern)):
            parsed = parse_pdf_in_process(path)
            passages = split_into_passages(
                parsed.pages, count_tokens=count_tokens, max_tokens=settings.passage_max_tokens
            )
            kind = guess_kind(parsed.pages)
            document = DocumentInput(parsed.title, kind, parsed.pages, tuple(passages))
            started = time.perf_counter()
            result = extract_facts(document, model)
            seconds = time.perf_counter() - started
            print(f"\n=== {path.name}: kind={kind} subkind={result.subkind} {seconds:.1f} s")
            rows = {}
            for fact in result.facts:
                origin = getattr(fact, "origin", "")
                table = getattr(fact, "table", ())
                print(
                    f"- {fact.field} [{fact.source} p.{fact.page} {origin}]: {fact.value[:300]!r}"
                )
                for row in table:
                    print(f"    row: {row}")
                rows[fact.field] = {
                    "value": fact.value,
                    "normalized": fact.normalized,
                    "page": fact.page,
                    "source": fact.source,
                    "origin": origin,
                    "table": [dict(row) for row in table],
                    "quotes": [e.text for e in fact.evidence],
                }
            results[path.name] = {"subkind": result.subkind, "seconds": seconds, "facts": rows}
            if group == "contract":
                results[path.name]["scores"] = _contract_scores(args.corpus, path, parsed, rows)
                print(f"  scores: {results[path.name]['scores']}")
    contract_scores = [r["scores"] for r in results.values() if "scores" in r]
    if contract_scores:
        print("\ncontract fields right (of labelled):")
        for field in contract_scores[0]:
            marks = [s[field] for s in contract_scores if s[field] is not None]
            print(f"  {field}: {sum(marks)} of {len(marks)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


def _contract_scores(corpus: Path, path: Path, parsed, rows: dict) -> dict:
    """bench/quality.py's scoring of a contract's facts against CUAD's labels."""
    from bench import _quality_report as report

    entries = json.loads((corpus / "legal" / "cuad_train_metadata.json").read_text())
    entry = next(e for e in entries if f"cuad_train_{e['file']}" == path.name)
    pages = set(report.law_pages(entry, list(parsed.pages)))
    return report._contract_facts(rows, entry, pages)


if __name__ == "__main__":
    main()
