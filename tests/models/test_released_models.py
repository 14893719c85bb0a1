#!/usr/bin/env python3
"""Every released model (models/NAME, docs/models.md) in every command that takes a model, by
its bare name (LINFORMER_MODELS=models): info, forward, embed, perplexity, spectrum,
init --from, pretrain --init-from, finetune --init-from (then predict and evaluate on the
result) and serve (real HTTP on 127.0.0.1). Before any model is released the same runs go
over stand-ins made the way `experiments/release.sh release` makes a release folder (fresh
weights from `linformer init`, a tokenizer, then experiments/export_model.py's bf16 copy),
so the test always runs. LINFORMER_BIN names the program. Python's unittest only (numpy for
the stand-ins' export)."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "serve"))
import serve_util as su  # noqa: E402

BIN = os.environ.get("LINFORMER_BIN", "")
TEXT = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")


def released():
    return sorted(d for d in glob.glob(os.path.join(ROOT, "models", "*"))
                  if os.path.isfile(os.path.join(d, "config.json")))


class ReleasedModels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN or not os.path.isfile(BIN):
            raise RuntimeError("LINFORMER_BIN must name the linformer program")
        cls.tmp = tempfile.mkdtemp()
        cls.env = dict(os.environ, OMP_NUM_THREADS="1", LINFORMER_MODELS="",
                       XDG_DATA_HOME=os.path.join(cls.tmp, "no-user-folder"))
        # Text: 600 short documents of Shakespeare; a classification set from the serve tests.
        with open(TEXT) as f:
            lines = [l.strip() for l in f if l.strip()][:2400]
        cls.text = os.path.join(cls.tmp, "text.txt")
        with open(cls.text, "w") as f:
            f.write("\n".join(" ".join(lines[i:i + 4]) for i in range(0, len(lines), 4)) + "\n")
        for name, seed in (("train", 1), ("dev", 2)):
            with open(os.path.join(cls.tmp, f"{name}.tsv"), "w") as f:
                f.write(su.tsv_rows(64, seed))
        cls.folders = released()
        if cls.folders:
            cls.env["LINFORMER_MODELS"] = os.path.join(ROOT, "models")
        else:
            cls.env["LINFORMER_MODELS"] = cls.make_stand_ins()
            cls.folders = sorted(glob.glob(os.path.join(cls.env["LINFORMER_MODELS"], "*")))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def lf(cls, *args, ok=True):
        p = subprocess.run([BIN, *args], capture_output=True, text=True, env=cls.env,
                           timeout=900)
        if ok and p.returncode != 0:
            raise AssertionError(f"linformer {' '.join(args)} failed ({p.returncode}):\n"
                                 f"{p.stderr[-3000:]}")
        return p

    @classmethod
    def make_stand_ins(cls):
        models = os.path.join(cls.tmp, "models")
        tok = os.path.join(cls.tmp, "tokenizer.model")
        cls.lf("tokenizer", "train", "--input", cls.text, "--out", tok, "--vocab-size", "300")
        small = ["--set", "vocab_size=300", "--set", "d_model=32", "--set", "n_heads=2",
                 "--set", "d_ff=64", "--set", "n_layers=2"]
        for name, extra in (("standard-tiny", ["--set", "attention=standard",
                                               "--set", "max_len=128"]),
                            ("linformer-tiny", ["--set", "attention=linformer", "--set", "k=16",
                                                "--set", "sharing=headwise",
                                                "--set", "max_len=128"]),
                            ("linformer-tiny-4k", ["--set", "attention=linformer",
                                                   "--set", "k=32", "--set", "max_len=512"])):
            raw = os.path.join(cls.tmp, "raw", name)
            cls.lf("init", *small, *extra, "--seed", "1", "--out", raw)
            shutil.copy(tok, raw)
            p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "experiments",
                                                                 "export_model.py"),
                                raw, os.path.join(models, name), "--dtype", "bf16"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise AssertionError("export_model.py failed:\n" + p.stderr)
        return models

    def each(self):
        for folder in self.folders:
            name = os.path.basename(folder)
            with open(os.path.join(folder, "config.json")) as f:
                cfg = json.load(f)
            with self.subTest(model=name):
                yield name, cfg

    def test_listed_by_name(self):
        listed = {m["name"]: m for m in json.loads(self.lf("models", "--json").stdout)}
        for name, cfg in self.each():
            self.assertIn(name, listed)
            self.assertEqual(listed[name]["max_len"], cfg["max_len"])
            self.assertEqual(listed[name]["attention"], cfg.get("attention", "linformer"))

    def test_inference_commands(self):
        out = self.tmp
        for name, cfg in self.each():
            self.assertIn('"d_model"', self.lf("info", "--model", name).stdout)
            self.lf("forward", "--model", name, "--random-batch", "2", "16",
                    "--out", f"{out}/{name}-f.safetensors")
            self.assertTrue(os.path.getsize(f"{out}/{name}-f.safetensors") > 0)
            self.lf("embed", "--model", name, "--input", self.text,
                    "--out", f"{out}/{name}-e.jsonl", "--format", "lines")
            with open(f"{out}/{name}-e.jsonl") as f:
                first = json.loads(f.readline())
            self.assertEqual(len(first["cls"]), cfg["d_model"])
            n = min(cfg["max_len"], 512)
            p = json.loads(self.lf("perplexity", "--model", name, "--text", self.text,
                                   "--seq-len", str(n), "--max-sequences", "4", "--json",
                                   "--quiet").stdout)
            self.assertGreater(p["ppl"], 1.0)
            self.lf("spectrum", "--model", name, "--text", self.text, "--out",
                    f"{out}/{name}-spectrum", "--n", str(min(n, 128)), "--sequences", "2",
                    "--no-lowrank", "--quiet")

    def test_training_commands_start_from_it(self):
        out = self.tmp
        for name, cfg in self.each():
            longer = ["--set", "attention=linformer", "--set", f"max_len={cfg['max_len'] * 2}"]
            self.lf("init", "--from", name, *longer, "--out", f"{out}/{name}-init")
            self.lf("pretrain", "--init-from", name, "--train", self.text, "--seq-len", "64",
                    "--batch-size", "2", "--steps", "2", "--quiet", "--out", f"{out}/{name}-pre")
            self.assertTrue(os.path.isdir(f"{out}/{name}-pre/model"))
            run = f"{out}/{name}-cls"
            self.lf("finetune", "--init-from", name, "--train", f"{out}/train.tsv", "--dev",
                    f"{out}/dev.tsv", "--max-len", "32", "--epochs", "1", "--batch-size", "16",
                    "--quiet", "--out", run)
            ev = f"{out}/{name}-eval.json"
            self.lf("evaluate", "--model", f"{run}/best", "--data", f"{out}/dev.tsv",
                    "--json", ev)
            with open(ev) as f:
                self.assertEqual(json.load(f)["count"], 64)

    def test_served_by_name(self):
        su.BIN = BIN
        os.environ["LINFORMER_MODELS"] = self.env["LINFORMER_MODELS"]
        os.environ["XDG_DATA_HOME"] = self.env["XDG_DATA_HOME"]
        for name, cfg in self.each():
            s = su.Server(name, threads=1)
            try:
                status, vecs = s.post("/embed", {"inputs": ["a short text", "another one"]})
                self.assertEqual(status, 200, vecs)
                self.assertEqual(len(vecs), 2)
                self.assertEqual(len(vecs[0]), cfg["d_model"])
            finally:
                s.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
