"""Build the registry corpus: corpus.yaml (public facts, each attribute citing its source) -> <name>.json.

    .venv/bin/python -m numaforge.lab.bmc.corpus          # rewrite the JSON files
    .venv/bin/python -m numaforge.lab.bmc.corpus --check  # exit 1 if a JSON file differs from the facts

The facts (corpus.yaml), the JSON documents and their sources (SOURCES.md) live in numaforge/lab/bmc/registries/,
package data: the installed simulator serves them, and the tests read them from there.

The documents have the DSP8010 AttributeRegistry shape the simulator's own flavours use (numaforge.lab.bmc
.flavours); tests/bmc/test_corpus.py checks they are current and that every flavour serving them passes DMTF's
service validator.
"""

from __future__ import annotations

import json
import sys

import yaml

from .flavours import CORPUS_DIR, _dependency, _entry, registry_document


def _expand(raw: dict) -> list[dict]:
    if "slots" not in raw:
        return [raw]
    return [
        {
            **{k: v for k, v in raw.items() if k != "slots"},
            "name": raw["name"].format(n=n),
            "menu": raw["menu"].format(n=n),
        }
        for n in raw["slots"]
    ]


def build(name: str, facts: dict) -> dict:
    raws = [r for raw in facts["attributes"] for r in _expand(raw)]
    entries = []
    for i, raw in enumerate(raws):
        entry = _entry(raw, i + 1, f"corpus.yaml: {name}: {raw['name']}")
        for v in entry.get("Value") or []:
            v["ValueDisplayName"] = (raw.get("value_display") or {}).get(v["ValueName"], v["ValueName"])
        entries.append(entry)
    deps = [_dependency(d, name) for d in facts.get("dependencies") or []]
    return registry_document(
        facts["id"],
        facts["model"],
        "numaforge registry corpus: built from public vendor facts (numaforge/lab/bmc/registries/SOURCES.md)",
        facts["owner"],
        "1.0.0",
        facts["firmware"],
        entries,
        deps,
    )


def main(argv: list[str]) -> int:
    corpus = yaml.safe_load((CORPUS_DIR / "corpus.yaml").read_text())
    stale = []
    for name, facts in corpus.items():
        text = json.dumps(build(name, facts), indent=1) + "\n"
        path = CORPUS_DIR / f"{name}.json"
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)} (run python -m numaforge.lab.bmc.corpus)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
