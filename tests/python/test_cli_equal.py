"""The module gives bitwise the CLI's results on the same model folder and inputs (f32):
forward, embed, predict, evaluate, and the token ids the CLI encodes."""
import json

import numpy as np
import pytest

import linformer
from conftest import read_safetensors, run_cli, write_safetensors


def random_ids(B, N, V, seed):
    return np.random.default_rng(seed).integers(0, V, size=(B, N)).astype(np.int64)


@pytest.mark.parametrize("with_mask", [False, True])
def test_forward_equals_cli(tiny_model, workdir, with_mask):
    m = linformer.Model(tiny_model)
    ids = random_ids(3, 16, m.vocab_size, 1)
    mask = np.ones((3, 16), np.int32)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    tensors = {"input_ids": ids}
    if with_mask:
        tensors["attention_mask"] = mask
    write_safetensors(workdir / "in.safetensors", tensors)
    run_cli("forward", "--model", tiny_model, "--input", workdir / "in.safetensors",
            "--out", workdir / "out.safetensors")
    cli = read_safetensors(workdir / "out.safetensors")
    out = m.forward(ids, mask if with_mask else None)
    assert set(out) == {"hidden_states", "mlm_logits"}
    for name in ("hidden_states", "mlm_logits"):
        assert out[name].dtype == np.float32
        assert out[name].shape == cli[name].shape
        np.testing.assert_array_equal(out[name], cli[name], err_msg=name)
    # int32 ids and a float mask give the same; logits can be left out.
    again = m.forward(ids.astype(np.int32), mask.astype(np.float32) if with_mask else None,
                      logits=False)
    assert set(again) == {"hidden_states"}
    np.testing.assert_array_equal(again["hidden_states"], cli["hidden_states"])


def cli_embed(classifier, texts_file, pool):
    run_cli("embed", "--model", classifier, "--input", texts_file, "--pool", pool,
            "--out", texts_file + f".{pool}.safetensors")
    return read_safetensors(texts_file + f".{pool}.safetensors")[pool]


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_embed_equals_cli(classifier, data, pooling):
    texts = open(data["texts"]).read().splitlines()
    cli = cli_embed(classifier, data["texts"], pooling)
    m = linformer.Model(classifier)
    vec = m.embed(texts, pooling=pooling)
    assert vec.dtype == np.float32 and vec.shape == (len(texts), m.d_model)
    np.testing.assert_array_equal(vec, cli)
    # Token ids (padded, with a mask) give the same vectors as the texts.
    ids, mask = m.tokenize(texts)
    np.testing.assert_array_equal(m.embed(ids, attention_mask=mask, pooling=pooling), cli)
    unit = m.embed(texts, pooling=pooling, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(unit, cli / np.linalg.norm(cli, axis=1, keepdims=True), rtol=1e-5)


def test_predict_and_classify_equal_cli(classifier, data):
    texts = open(data["texts"]).read().splitlines()
    out, _ = run_cli("predict", "--model", classifier, "--input", data["texts"])
    cli = [json.loads(line) for line in out.splitlines()]
    m = linformer.Model(classifier)
    assert m.labels == ["negative", "positive"]
    assert m.predict(texts) == cli
    probs = m.classify(texts)
    assert probs.dtype == np.float32 and probs.shape == (len(texts), 2)
    best = [m.labels[i] for i in probs.argmax(axis=1)]
    assert best == [r["label"] for r in cli]
    np.testing.assert_allclose(probs[:, 1], [r["probs"]["positive"] for r in cli], atol=1e-6)


def test_evaluate_equals_cli(classifier, data, workdir):
    run_cli("evaluate", "--model", classifier, "--data", data["dev"], "--json",
            workdir / "eval.json", "--quiet")
    cli = json.load(open(workdir / "eval.json"))
    py = linformer.Model(classifier).evaluate(data["dev"])
    for key in ("accuracy", "f1", "precision", "recall", "loss", "count", "confusion", "format",
                "bad_rows", "max_len"):
        assert py[key] == cli[key], key


def test_tokenize_matches_the_cli_encoding(classifier, data):
    m = linformer.Model(classifier)
    tok = m.tokenizer
    texts = ["the movie was good", "bad"]
    ids, mask = m.tokenize(texts)
    assert ids.dtype == np.int32 and mask.dtype == np.int32
    for i, t in enumerate(texts):
        want = tok.encode(t, add_special=True)
        assert list(ids[i, :len(want)]) == want
        assert mask[i].sum() == len(want)
        assert all(ids[i, len(want):] == m.config["pad_id"])
    assert tok.decode(tok.encode("the movie was good")) == "the movie was good"
    # Truncation to max_len keeps <s> ... </s>.
    long = " ".join(["good"] * 100)
    ids, _ = m.tokenize(long, max_len=8, truncate="tail")
    assert ids.shape == (1, 8) and ids[0, 0] == 0 and ids[0, -1] == 2


def test_bf16_is_close_to_f32(tiny_model):
    ids = random_ids(2, 16, 37, 3)
    f32 = linformer.Model(tiny_model).forward(ids)["hidden_states"]
    if "bf16" not in linformer.precisions():
        # A CPU without a bf16 matmul: the model refuses it and says why.
        with pytest.raises(RuntimeError, match="bf16 needs AVX-512"):
            linformer.Model(tiny_model, precision="bf16")
        pytest.skip("this CPU has no bf16 matmul (AVX-512)")
    bf16_model = linformer.Model(tiny_model, precision="bf16")
    assert bf16_model.precision == "bf16"
    bf16 = bf16_model.forward(ids)["hidden_states"]
    np.testing.assert_allclose(bf16, f32, atol=0.1)


def test_int8_is_close_to_f32(tiny_model):
    ids = random_ids(2, 16, 37, 3)
    f32 = linformer.Model(tiny_model).forward(ids)["hidden_states"]
    if "int8" not in linformer.precisions():
        pytest.skip("this CPU has no int8 matmul (AVX2)")
    m = linformer.Model(tiny_model, precision="int8")
    assert m.precision == "int8"
    q = m.forward(ids)["hidden_states"]
    assert not np.array_equal(q, f32)  # the int8 products ran
    rel = np.linalg.norm(q - f32) / np.linalg.norm(f32)
    assert rel < 0.05, rel
    # Every layer kept in f32: f32's result exactly; a layer the model lacks: ValueError.
    layers = list(range(m.config["n_layers"]))
    kept = linformer.Model(tiny_model, precision="int8", float_layers=layers)
    np.testing.assert_array_equal(kept.forward(ids)["hidden_states"], f32)
    with pytest.raises(ValueError, match="layer 99"):
        linformer.Model(tiny_model, precision="int8", float_layers=[99])


def test_auto_precision_is_what_info_says(tiny_model):
    # "auto" runs the precision `linformer info` names for this CPU (f32 or bf16, never int8),
    # with bitwise that precision's results.
    a = linformer.auto_precision()
    assert a["precision"] in ("f32", "bf16") and a["reason"]
    info, _ = run_cli("info")
    assert f"--precision auto runs {a['precision']} ({a['reason']})" in info
    ids = random_ids(2, 16, 37, 3)
    m = linformer.Model(tiny_model, precision="auto")
    assert m.precision == a["precision"]
    same = linformer.Model(tiny_model, precision=a["precision"]).forward(ids)["hidden_states"]
    np.testing.assert_array_equal(m.forward(ids)["hidden_states"], same)
    with pytest.raises(ValueError, match="auto"):
        linformer.Model(tiny_model, precision="fp16")
    # Each precision's measured product peak, for the precisions this CPU runs.
    peaks = linformer.precisions(peaks=True)
    assert list(peaks) == linformer.precisions()
    assert all(v > 0 for v in peaks.values()), peaks


def test_init_save_and_reload(workdir):
    m = linformer.init({"vocab_size": 50, "max_len": 16, "d_model": 16, "n_heads": 2,
                        "d_ff": 32, "n_layers": 1, "k": [4]}, seed=5)
    assert m.config["vocab_size"] == 50 and m.max_len == 16 and m.path == ""
    m.save(str(workdir / "saved"))
    again = linformer.Model(str(workdir / "saved"))
    ids = random_ids(2, 16, 50, 4)
    np.testing.assert_array_equal(m.forward(ids)["mlm_logits"], again.forward(ids)["mlm_logits"])
    # As `linformer init --seed 5` with the same config.
    with open(workdir / "cfg.json", "w") as f:
        json.dump(m.config, f)
    run_cli("init", "--config", workdir / "cfg.json", "--seed", 5, "--out", workdir / "cli_init")
    cli = linformer.Model(str(workdir / "cli_init"))
    np.testing.assert_array_equal(cli.forward(ids)["hidden_states"],
                                  again.forward(ids)["hidden_states"])
    with pytest.raises(ValueError, match="already holds a model"):
        m.save(str(workdir / "saved"))
    m.save(str(workdir / "saved"), overwrite=True)
