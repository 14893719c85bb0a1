"""pretrain and finetune from Python equal the program's runs with the same options (the saved
weights bitwise), report progress to a callback, and stop cleanly on Ctrl-C."""
import json
import os
import random
import shutil
import signal
import threading

import numpy as np
import pytest

import linformer
from conftest import TINY_SETS, read_safetensors, run_cli


def assert_same_weights(a, b):
    ta, tb = read_safetensors(a), read_safetensors(b)
    assert sorted(ta) == sorted(tb)
    for name in ta:
        np.testing.assert_array_equal(ta[name], tb[name], err_msg=name)


def checkpoint_state(run):
    """state.json of the newest checkpoint (RUN/checkpoints/latest names its folder)."""
    with open(os.path.join(run, "checkpoints", "latest")) as f:
        name = f.read().strip()
    with open(os.path.join(run, "checkpoints", name, "state.json")) as f:
        return json.load(f)


def train_records(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    return [(r["step"], r["loss"]) for r in recs if r["split"] == "train"]


@pytest.fixture(scope="module")
def corpus(workdir):
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "house", "red", "blue",
             "big", "small", "and", "with", "tree", "bird", "sang", "song"]
    rng = random.Random(5)
    path = workdir / "corpus.txt"
    with open(path, "w") as f:
        for _ in range(400):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randrange(4, 20))) + "\n")
    config = workdir / "mlm.json"
    config.write_text(json.dumps({"max_len": 32, "d_model": 32, "n_heads": 2, "d_ff": 64,
                                  "n_layers": 2, "k": [8], "dropout": 0.1}))
    return str(path), str(config)


PRETRAIN = dict(vocab_size=60, batch_size=4, steps=12, log_every=3, eval_every=6, eval_batches=2,
                checkpoint_every=6, seed=2, lr=1e-3)


def test_pretrain_equals_cli(workdir, corpus):
    text, config = corpus
    cli_run, py_run = str(workdir / "pre_cli"), str(workdir / "pre_py")
    run_cli("pretrain", "--train", text, "--config", config, "--out", cli_run, "--vocab-size", 60,
            "--batch-size", 4, "--steps", 12, "--log-every", 3, "--eval-every", 6,
            "--eval-batches", 2, "--checkpoint-every", 6, "--seed", 2, "--lr", 1e-3, "--quiet")
    records = []
    r = linformer.pretrain(train=text, config=config, out=py_run, callback=records.append,
                           **PRETRAIN)
    assert r["steps_done"] == 12 and not r["stopped"]
    assert_same_weights(f"{cli_run}/model/model.safetensors", f"{py_run}/model/model.safetensors")
    assert train_records(py_run) == train_records(cli_run)
    # The callback saw every record of metrics.jsonl, in order.
    with open(f"{py_run}/metrics.jsonl") as f:
        assert records == [json.loads(line) for line in f]
    steps = [(x["step"], x["split"]) for x in records]
    assert steps[:2] == [(3, "train"), (6, "train")] and (6, "valid") in steps
    assert all("tokens_per_s" in x for x in records if x["split"] == "train")
    assert r["final_valid_loss"] == pytest.approx(records[-1]["loss"])
    # Resuming the finished run runs nothing and measures nothing.
    again = linformer.pretrain(out=py_run, resume=True, quiet=True)
    assert again["steps_done"] == 12
    assert again["final_valid_loss"] is None and again["final_valid_ppl"] is None
    # The final model is a model folder with its tokenizer.
    m = linformer.Model(f"{py_run}/model")
    assert m.tokenizer is not None and m.vocab_size == m.tokenizer.vocab_size


def test_resume_with_a_precision_runs_that_call_in_it(workdir, corpus):
    # A run begun in f32 and stopped after one step, copied three times and resumed: with no
    # precision and with precision="f32" it is the same run bit for bit; with "bf16" (where the
    # CPU trains in bf16) that call trains in bf16, so the weights differ.
    if "bf16" not in linformer.precisions():
        pytest.skip("this CPU does not run bf16")
    text, _ = corpus
    # Large enough that its FFN's products run in bf16 (smaller ones stay f32 in every precision).
    config = workdir / "prec.json"
    config.write_text(json.dumps({"max_len": 32, "d_model": 64, "n_heads": 2, "d_ff": 128,
                                  "n_layers": 1, "k": 8}))
    first = str(workdir / "prec_first")
    linformer.pretrain(train=text, config=str(config), out=first, precision="f32", time_limit=1e-9,
                       quiet=True, **PRETRAIN)
    weights = {}
    for name, extra in [("none", {}), ("f32", {"precision": "f32"}), ("bf16", {"precision": "bf16"})]:
        run = str(workdir / f"prec_{name}")
        shutil.copytree(first, run)
        r = linformer.pretrain(out=run, resume=True, quiet=True, **extra)
        assert r["steps_done"] == 12
        weights[name] = read_safetensors(f"{run}/model/model.safetensors")
    for n in weights["none"]:
        np.testing.assert_array_equal(weights["none"][n], weights["f32"][n], err_msg=n)
    assert any(not np.array_equal(weights["none"][n], weights["bf16"][n]) for n in weights["none"])


FINETUNE_CLI = ["--vocab-size", 40, "--batch-size", 16, "--epochs", 2, "--lr", 3e-3, "--seed", 3,
                "--quiet"]


def test_finetune_equals_cli(workdir, data, classifier):
    # The classifier fixture is `linformer finetune` with these options.
    py_run = str(workdir / "ft_py")
    sets = list(TINY_SETS)
    r = linformer.finetune(train=data["train"], dev=data["dev"], out=py_run, vocab_size=40,
                           batch_size=16, epochs=2, lr=3e-3, seed=3, sets=sets, quiet=True)
    cli_run = os.path.dirname(classifier)
    assert_same_weights(f"{cli_run}/model/model.safetensors", f"{py_run}/model/model.safetensors")
    assert_same_weights(f"{cli_run}/best/model.safetensors", f"{py_run}/best/model.safetensors")
    assert train_records(py_run) == train_records(cli_run)
    eval_cli = json.load(open(f"{cli_run}/best/eval.json"))
    assert r["steps_done"] == r["total_steps"] == 40 and not r["stopped"]
    assert r["metric"] == "accuracy"
    assert r["best_metric"] == eval_cli["accuracy"]
    assert r["last_dev"]["accuracy"] == r["best_metric"] or r["best_step"] != 40


def test_ctrl_c_stops_with_a_checkpoint_and_resume_continues(workdir, data):
    run = str(workdir / "ft_interrupted")
    fired = []

    def on_record(rec):
        # Ctrl-C from another thread while the engine runs (the GIL released).
        if not fired:
            fired.append(rec["step"])
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()

    with pytest.raises(KeyboardInterrupt):
        linformer.finetune(train=data["train"], dev=data["dev"], out=run, vocab_size=40,
                           batch_size=16, epochs=200, lr=3e-3, seed=3, sets=TINY_SETS,
                           log_every=1, callback=on_record)
    state = checkpoint_state(run)
    assert fired and fired[0] <= state["step"] < 20 * 200
    assert train_records(run)[-1][0] == state["step"]
    # The run folder is complete: resume continues it to a step limit.
    r = linformer.finetune(out=run, resume=True, stop_after=2, quiet=True)
    assert r["stopped"] and r["steps_done"] == state["step"] + 2


def test_an_exception_in_the_callback_stops_the_run(workdir, data):
    run = str(workdir / "ft_callback_error")

    def on_record(rec):
        raise ZeroDivisionError("from the callback")

    with pytest.raises(ZeroDivisionError, match="from the callback"):
        linformer.finetune(train=data["train"], out=run, vocab_size=40, batch_size=16, epochs=50,
                           seed=3, sets=TINY_SETS, log_every=1, callback=on_record)
    state = checkpoint_state(run)
    assert state["step"] == 1


def test_help_lists_the_options():
    assert "batch_size = 8" in linformer.pretrain.__doc__
    assert "lr = 0.0001" in linformer.finetune.__doc__
    assert "KeyboardInterrupt" in linformer.finetune.__doc__
