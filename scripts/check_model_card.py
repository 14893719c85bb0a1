#!/usr/bin/env python3
"""Checks released model folders: each must load by its files and carry a model card
(README.md) with what a person picking a model needs (docs/models.md, "Model cards").

    scripts/check_model_card.py MODEL_DIR...

A model card is a Hugging Face hub README: YAML front matter between '---' lines with the
keys below, then Markdown sections with the headings below. Exit status 0 when every folder
passes, 1 with one line per problem ("DIR: problem") otherwise. Python's standard library
only, so it runs on a fresh Debian 12 machine.
"""
import json
import os
import re
import sys

FRONT_MATTER_KEYS = ["license", "language", "library_name", "tags", "datasets", "pipeline_tag"]
SECTIONS = ["Model description", "How to use", "Training data", "Training procedure",
            "Evaluation", "Intended uses", "Limitations", "License"]
# Facts the Training procedure section must state, each matched as a phrase.
PROCEDURE_FACTS = {"tokens": r"\btokens\b", "time": r"\b(hours?|minutes?|h)\b",
                   "hardware": r"\b(CPU|AMD|Intel|Xeon|EPYC|Zen)\b",
                   "precision": r"\b(f32|bf16|float32|bfloat16)\b"}
FILES = ["config.json", "model.safetensors", "README.md"]
TOKENIZER_FILES = ["tokenizer.model", "tokenizer.json", "vocab.txt", "vocab.json"]


def front_matter(text):
    """The YAML front matter's top-level keys (a small subset of YAML: `key: value` and
    `key:` followed by `- item` lines, indented or not), or None when there is none."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 4)
    if end < 0:
        return None
    keys = {}
    current = None
    for line in text[4:end].splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_][\w-]*):\s*(.*)$", line)
        if m:
            current = m.group(1)
            keys[current] = m.group(2).strip()
        elif current and re.match(r"^\s*-\s*\S", line):  # "- item", indented or not
            keys[current] = (keys[current] + " " + line.strip()).strip()
    return keys


def sections(text):
    """Heading text -> body, for ## headings."""
    out = {}
    parts = re.split(r"^##\s+(.+?)\s*$", text, flags=re.M)
    for i in range(1, len(parts) - 1, 2):
        out[parts[i].strip()] = parts[i + 1]
    return out


def check(folder):
    problems = []
    for f in FILES:
        if not os.path.isfile(os.path.join(folder, f)):
            problems.append(f"missing {f}")
    if not any(os.path.isfile(os.path.join(folder, f)) for f in TOKENIZER_FILES):
        problems.append("no tokenizer file (" + ", ".join(TOKENIZER_FILES) + ")")
    cfg_path = os.path.join(folder, "config.json")
    if os.path.isfile(cfg_path):
        try:
            with open(cfg_path) as f:
                cfg = json.load(f)
            for k in ("attention", "max_len", "d_model", "n_layers"):
                if k not in cfg:
                    problems.append(f"config.json has no '{k}'")
        except (OSError, ValueError) as e:
            problems.append(f"config.json does not parse: {e}")
    card_path = os.path.join(folder, "README.md")
    if not os.path.isfile(card_path):
        return problems
    with open(card_path, encoding="utf-8") as f:
        text = f.read()
    fm = front_matter(text)
    if fm is None:
        problems.append("README.md has no YAML front matter (--- ... ---)")
        fm = {}
    for k in FRONT_MATTER_KEYS:
        if not fm.get(k):
            problems.append(f"front matter lacks '{k}'")
    if fm.get("library_name") and fm["library_name"] != "linformer":
        problems.append(f"library_name is '{fm['library_name']}', not 'linformer'")
    secs = sections(text)
    for s in SECTIONS:
        if not any(h.lower().startswith(s.lower()) for h in secs):
            problems.append(f"no '## {s}' section")
    proc = next((b for h, b in secs.items() if h.lower().startswith("training procedure")), "")
    for fact, pattern in PROCEDURE_FACTS.items():
        if proc and not re.search(pattern, proc):
            problems.append(f"Training procedure does not state the {fact}")
    ev = next((b for h, b in secs.items() if h.lower().startswith("evaluation")), "")
    if ev and not re.search(r"\d", ev):
        problems.append("Evaluation states no figure")
    name = os.path.basename(os.path.normpath(folder))
    if name not in text:
        problems.append(f"the card never names the model ('{name}')")
    return problems


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    bad = 0
    for folder in argv[1:]:
        for p in check(folder):
            print(f"{folder}: {p}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
