"""The scripts of examples/python run and print what they promise."""
import os
import subprocess
import sys

import linformer
from conftest import SOURCE_DIR, TINY_SETS

EXAMPLES = os.path.join(SOURCE_DIR, "examples", "python")


def run_example(name, *args, stdin=None):
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *map(str, args)],
                       input=stdin, capture_output=True, text=True)
    assert p.returncode == 0, f"{name} failed:\n{p.stdout}\n{p.stderr}"
    return p.stdout


def test_classify_example(classifier):
    out = run_example("classify.py", classifier, "the movie was good", "the plot was bad")
    lines = [line.split("\t") for line in out.splitlines()]
    assert [l[2] for l in lines] == ["the movie was good", "the plot was bad"]
    m = linformer.Model(classifier)
    want = [r["label"] for r in m.predict(["the movie was good", "the plot was bad"])]
    assert [l[0] for l in lines] == want
    # Texts from stdin.
    assert run_example("classify.py", classifier, stdin="the movie was good\n") == out.splitlines(True)[0]


def test_embedding_search_example(classifier, data):
    out = run_example("embedding_search.py", classifier, data["texts"], data["dev_texts"][3], 3)
    lines = [line.split("\t", 1) for line in out.splitlines()]
    assert len(lines) == 3
    # The query is a line of the file: it finds itself first, with similarity 1.
    assert lines[0][1] == data["dev_texts"][3] and abs(float(lines[0][0]) - 1) < 1e-4
    assert float(lines[0][0]) >= float(lines[1][0]) >= float(lines[2][0])


def test_finetune_example(workdir, data):
    out_dir = workdir / "example_run"
    args = [data["train"], data["dev"], out_dir, "vocab_size=40", "batch_size=16", "epochs=1",
            "lr=0.003", "seed=3", "log_every=5"] + [f"sets={s}" for s in TINY_SETS]
    out = run_example("finetune.py", *args)
    assert "step 5: loss" in out and "step 20: dev accuracy" in out
    assert "best dev accuracy" in out and f"evaluate {out_dir}/best: accuracy" in out
    assert (out_dir / "best" / "model.safetensors").exists()
