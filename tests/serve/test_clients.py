#!/usr/bin/env python3
"""`linformer serve` driven by the client libraries people point at a text-embeddings-inference
server (npm, pinned in tests/clients/package-lock.json, installed by scripts/setup.sh --test):
the OpenAI SDK (`openai` 5.x: its default base64 encoding, float, explicit base64, and the base
URL without /v1) and Hugging Face's `@huggingface/inference` 4.x (featureExtraction on an
endpoint URL, which posts to /). Every answer is checked against `linformer embed`.
Usage: LINFORMER_BIN=build/linformer test_clients.py [unittest options]"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util as su  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = os.path.join(os.path.dirname(HERE), "clients")
ROOT = None
MODEL = ENCODER = None
TEXTS = ["the movie was good", "bad", "really bad plot and acting , the film was very bad",
         "Ünïcode tèxt — with “quotes”"]


def setUpModule():
    global ROOT, MODEL, ENCODER
    for pkg in ["openai", "@huggingface/inference"]:
        if not os.path.isdir(os.path.join(CLIENTS, "node_modules", pkg)):
            raise RuntimeError(f"{CLIENTS}/node_modules/{pkg} is missing: run scripts/setup.sh --test "
                               f"(it runs `npm ci` in tests/clients)")
    ROOT = tempfile.mkdtemp(prefix="lf_clients_test_")
    MODEL = su.make_classifier(ROOT, "single")
    ENCODER = os.path.join(ROOT, "encoder")
    shutil.copytree(MODEL, ENCODER)
    os.unlink(os.path.join(ENCODER, "labels.json"))


def tearDownModule():
    shutil.rmtree(ROOT, ignore_errors=True)


def node(mode, base, texts):
    p = subprocess.run(["node", os.path.join(CLIENTS, "clients.mjs"), mode, base, json.dumps(texts)],
                       capture_output=True, text=True, timeout=120, cwd=CLIENTS)
    if p.returncode != 0:
        raise AssertionError(f"node clients.mjs {mode} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout)


def f32(vectors):
    """Each value rounded to float32 (base64 gives float32s, JSON gives their shortest text)."""
    return [list(struct.unpack(f"<{len(v)}f", struct.pack(f"<{len(v)}f", *v))) for v in vectors]


def reference(model, texts, pooling):
    """`linformer embed`'s vectors, L2-normalised (as /embed and /v1/embeddings answer)."""
    path = os.path.join(ROOT, "texts.txt")
    with open(path, "w") as f:
        f.write("\n".join(texts) + "\n")
    out = su.run(["embed", "--model", model, "--input", path, "--pool", pooling])
    vecs = [json.loads(line)[pooling] for line in out.splitlines()]
    return [[x / math.sqrt(sum(y * y for y in v)) for x in v] for v in vecs]


class Clients(unittest.TestCase):
    def assertClose(self, got, want):
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertEqual(len(g), len(w))
            self.assertLess(max(abs(a - b) for a, b in zip(g, w)), 1e-5)

    def test_openai_sdk(self):
        with su.Server(MODEL) as s:
            base = f"http://127.0.0.1:{s.port}"
            want = reference(MODEL, TEXTS, "cls")
            _, served = s.post("/v1/embeddings", {"input": TEXTS})
            served = [d["embedding"] for d in served["data"]]
            for mode in ["openai-default", "openai-float", "openai-base64", "openai-noprefix"]:
                with self.subTest(mode=mode):
                    out = node(mode, base, TEXTS)
                    self.assertEqual(out["indices"], list(range(len(TEXTS))))
                    self.assertEqual(out["model"], "linformer")
                    self.assertGreater(out["usage"]["prompt_tokens"], len(TEXTS))
                    self.assertClose(out["vectors"], want)
                    # The SDK's float32 values are the server's exactly, whichever the encoding.
                    self.assertEqual(f32(out["vectors"]), f32(served))
                    want_type = "string" if mode == "openai-base64" else "object"
                    self.assertEqual(out["raw_types"], [want_type] * len(TEXTS))
            one = node("openai-default", base, TEXTS[0])
            self.assertEqual(f32(one["vectors"]), f32(served[:1]))

    def test_huggingface_inference_feature_extraction(self):
        for model, pooling, args in [(ENCODER, "cls", []), (ENCODER, "mean", ["--pooling", "mean"]),
                                     (MODEL, "cls", ["--root-route", "embed"])]:
            with self.subTest(model=os.path.basename(model), pooling=pooling):
                with su.Server(model, *args) as s:
                    base = f"http://127.0.0.1:{s.port}"
                    want = reference(model, TEXTS, pooling)
                    out = node("hf-feature", base, TEXTS)
                    self.assertClose(out["vectors"], want)
                    one = node("hf-feature", base, TEXTS[1])  # TEI answers [[...]] for one text
                    self.assertClose(one["vectors"], want[1:2])
                    self.assertIn('POST / 200', s.stderr())


if __name__ == "__main__":
    unittest.main()
