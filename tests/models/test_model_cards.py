#!/usr/bin/env python3
"""scripts/check_model_card.py on a complete model folder (passes), on the same folder with
each required part removed in turn (fails, naming the part), and on every released model in
models/ (each must pass; docs/models.md); experiments/model_card.py on a made-up run folder
(its card passes the check and states the run's own figures). Python's unittest only."""
import json
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
CARD = os.path.join(ROOT, "experiments", "model_card.py")

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

    def test_lists_may_be_unindented(self):
        self.write(GOOD_CARD.replace("  - ", "- "))
        code, out = run(self.dir)
        self.assertEqual(code, 0, out)

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


class CardGenerator(unittest.TestCase):
    """A pretraining run of 30 steps of 4 x 128 tokens, resumed once (elapsed_s restarts),
    on two recorded sessions, two SST-2 seeds and a twin: the card must pass the check and
    carry these figures, worked out here by hand."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.run_dir = os.path.join(self.tmp, "runs", "pre", "tiny-lin")
        os.makedirs(self.run_dir)
        cfg = {"attention": "linformer", "k": 16, "sharing": "headwise", "projection": "linear",
               "max_len": 128, "d_model": 32, "n_heads": 2, "d_ff": 64, "n_layers": 2,
               "vocab_size": 500}
        self.put(self.run_dir, "config.json", cfg)
        self.put(self.run_dir, "train_args.json",
                 {"batch_size": 4, "seq_len": 128, "steps": 30, "lr": 5e-4, "warmup_steps": 1,
                  "weight_decay": 0.01, "clip_norm": 1.0, "precision": "f32", "seed": 1,
                  "mask_prob": 0.15})
        lines = [{"split": "train", "step": 10, "elapsed_s": 900.0},
                 {"split": "train", "step": 20, "elapsed_s": 1800.0},
                 {"split": "valid", "step": 20, "elapsed_s": 1810.0},
                 {"split": "train", "step": 25, "elapsed_s": 1200.0},  # resumed
                 {"split": "train", "step": 30, "elapsed_s": 3600.0}]
        with open(os.path.join(self.run_dir, "metrics.jsonl"), "w") as f:
            f.write("\n".join(json.dumps(m) for m in lines) + "\n")
        with open(os.path.join(self.run_dir, "sessions.tsv"), "w") as f:
            f.write("started\tcpu\tkernels\tprecision\tthreads\tfrom_step\n"
                    "2026-11-29T09:13:00Z\tIntel(R) Xeon(R) Processor\tavx512bf16\tf32\t1\t0\n"
                    "2026-11-30T09:00:00Z\tAMD EPYC 9R14\tavx512bf16\tbf16\t1\t20\n"
                    "2026-12-01T09:00:00Z\tAMD EPYC 9R14\tavx512bf16\tbf16\t1\t25\n")
        self.put(self.run_dir, "perplexity.json", {"ppl": 123.456, "seq_len": 128, "tokens": 4096})
        twin = os.path.join(self.tmp, "runs", "pre", "tiny-std")
        os.makedirs(twin)
        self.put(twin, "perplexity.json", {"ppl": 120.0, "seq_len": 128, "tokens": 4096})
        # Held-out test perplexities: the f32 weights, the released bf16 copy, the twin's.
        self.put(self.run_dir, "test-n128.json", {"ppl": 130.0, "seq_len": 128, "tokens": 8192})
        self.put(self.run_dir, "test-n128-bf16.json", {"ppl": 131.3, "seq_len": 128, "tokens": 8192})
        self.put(twin, "test-n128.json", {"ppl": 125.0, "seq_len": 128, "tokens": 8192})
        for name, accs in (("tiny-lin", (0.80, 0.82)), ("tiny-std", (0.83, 0.83))):
            for seed, acc in enumerate(accs, 1):
                d = os.path.join(self.tmp, "runs", "cls", f"sst2-{name}-s{seed}")
                os.makedirs(d)
                self.put(d, "eval.json", {"accuracy": acc})
                self.put(d, "train_args.json", {"lr": 9.999999747378752e-05, "epochs": 2})
        self.model = os.path.join(self.tmp, "tiny-lin")
        os.makedirs(self.model)
        self.put(self.model, "config.json", cfg)
        for name in ("model.safetensors", "tokenizer.model"):
            open(os.path.join(self.model, name), "wb").close()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    @staticmethod
    def put(folder, name, obj):
        with open(os.path.join(folder, name), "w") as f:
            json.dump(obj, f)

    def card(self, *extra):
        return subprocess.run(
            [sys.executable, CARD, "--name", "tiny-lin", "--run", self.run_dir, "--out",
             self.model, *extra], capture_output=True, text=True)

    def test_the_card_passes_and_states_the_runs_figures(self):
        p = self.card("--finetune",
                      os.path.join(self.tmp, "runs", "cls", "*-tiny-lin-s*", "eval.json"),
                      "--twin", "tiny-std=" + os.path.join(self.tmp, "runs", "pre", "tiny-std"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        code, out = run(self.model)
        self.assertEqual(code, 0, out)
        with open(os.path.join(self.model, "README.md")) as f:
            text = f.read()
        self.assertIn("15,360 (30 steps of 4 x 128 tokens)", text)  # 30 * 4 * 128
        self.assertIn("1.5 hours of training", text)  # 1800 s + 3600 s
        self.assertIn("across 3 session(s)", text)
        self.assertIn("| precision | f32 to step 20, then bf16 |", text)
        self.assertIn("| test perplexity (n 128, 8,192 tokens, f32 weights) | 130.00 | 125.00 |", text)
        self.assertIn("the released bf16 weights | 131.30 (+1.00%) |", text)
        self.assertIn("AMD EPYC 9R14; Intel(R) Xeon(R) Processor", text)
        self.assertIn("k = 16 (headwise sharing", text)
        self.assertIn("| 123.46 | 120.00 |", text)
        self.assertIn("81.00 ± 1.41 (2 seeds)", text)  # mean and sample deviation of 80, 82
        self.assertIn("83.00 ± 0.00 (2 seeds)", text)
        self.assertIn("AdamW lr 0.0001, 2 epoch(s)", text)

    def test_a_twin_measured_at_another_length_is_not_set_beside_it(self):
        twin = os.path.join(self.tmp, "runs", "pre", "tiny-std")
        self.put(twin, "perplexity.json", {"ppl": 120.0, "seq_len": 512, "tokens": 4096})
        p = self.card("--twin", "tiny-std=" + twin)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(os.path.join(self.model, "README.md")) as f:
            text = f.read()
        self.assertIn("| validation perplexity (n 128, 4,096 tokens) | 123.46 | - |", text)
        self.assertIn("Not finetuned yet", text)

    def test_a_folder_that_is_not_a_run_is_refused(self):
        os.remove(os.path.join(self.run_dir, "train_args.json"))
        p = self.card()
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("has no train_args.json", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
