#!/usr/bin/env python3
"""scripts/check_model_card.py on a complete model folder (passes), on the same folder with
each required part removed in turn (fails, naming the part), and on every released model in
models/ (each must pass; docs/models.md). Python's unittest only."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "scripts", "check_model_card.py")

GOOD_CARD = """---
license: apache-2.0
language:
  - en
library_name: linformer
tags:
  - linformer
  - fill-mask
datasets:
  - gutenberg
pipeline_tag: fill-mask
---
# demo-mini

## Model description
demo-mini is a 4-layer Linformer encoder.

## How to use
linformer embed --model demo-mini --input texts.txt

## Training data
Public-domain books.

## Training procedure
300M tokens of masked-LM pretraining, 9.1 hours on an Intel Xeon (2 cores), f32.

## Evaluation
Validation perplexity 41.2.

## Intended uses
Embeddings and finetuning.

## Limitations
English only.

## License
Apache-2.0.
"""


def run(folder):
    p = subprocess.run([sys.executable, CHECK, folder], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class ModelCards(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.dir = os.path.join(self.tmp, "demo-mini")
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, "config.json"), "w") as f:
            f.write('{"attention": "linformer", "max_len": 512, "d_model": 256, "n_layers": 4}')
        for name in ("model.safetensors", "tokenizer.model"):
            open(os.path.join(self.dir, name), "wb").close()
        self.write(GOOD_CARD)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write(self, card):
        with open(os.path.join(self.dir, "README.md"), "w") as f:
            f.write(card)

    def test_a_complete_folder_passes(self):
        code, out = run(self.dir)
        self.assertEqual(code, 0, out)

    def test_each_front_matter_key_is_required(self):
        for key in ("license", "language", "library_name", "tags", "datasets", "pipeline_tag"):
            card = re.sub(rf"^{key}:.*\n(  - .*\n)*", "", GOOD_CARD, flags=re.M)
            self.assertNotEqual(card, GOOD_CARD, key)
            self.write(card)
            code, out = run(self.dir)
            self.assertEqual(code, 1, key)
            self.assertIn(f"front matter lacks '{key}'", out)

    def test_each_section_is_required(self):
        for sec in ("Model description", "How to use", "Training data", "Training procedure",
                    "Evaluation", "Intended uses", "Limitations", "License"):
            self.write(GOOD_CARD.replace(f"## {sec}\n", "text\n"))
            code, out = run(self.dir)
            self.assertEqual(code, 1, sec)
            self.assertIn(f"no '## {sec}' section", out)

    def test_the_procedure_states_tokens_time_hardware_precision(self):
        line = "300M tokens of masked-LM pretraining, 9.1 hours on an Intel Xeon (2 cores), f32."
        for fact, without in (("tokens", line.replace("tokens", "words")),
                              ("time", line.replace("9.1 hours", "a while")),
                              ("hardware", line.replace("an Intel Xeon", "a machine")),
                              ("precision", line.replace(", f32", ""))):
            self.write(GOOD_CARD.replace(line, without))
            code, out = run(self.dir)
            self.assertEqual(code, 1, fact)
            self.assertIn(f"does not state the {fact}", out)

    def test_missing_files_and_no_card(self):
        os.remove(os.path.join(self.dir, "tokenizer.model"))
        os.remove(os.path.join(self.dir, "README.md"))
        code, out = run(self.dir)
        self.assertEqual(code, 1)
        self.assertIn("missing README.md", out)
        self.assertIn("no tokenizer file", out)

    def test_every_released_model_passes(self):
        folders = sorted(d for d in glob.glob(os.path.join(ROOT, "models", "*"))
                         if os.path.isdir(d))
        for d in folders:
            code, out = run(d)
            self.assertEqual(code, 0, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
