"""Every kind of bad input raises the right exception with a message naming the problem, and
random dtypes, shapes and values never crash the interpreter (docs/python.md, Errors)."""
import os

import numpy as np
import pytest

import linformer


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return linformer.Model(tiny_model)


def test_missing_paths_raise_file_not_found(tmp_path, classifier):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        linformer.Model(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        linformer.Model(str(tmp_path))  # a folder without a model
    with pytest.raises(FileNotFoundError):
        linformer.Tokenizer(str(tmp_path / "nope.model"))
    with pytest.raises(FileNotFoundError, match="data"):
        linformer.Model(classifier).evaluate(str(tmp_path / "nope.tsv"))


def test_corrupt_model_raises_runtime_error(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}xxxxxx")
    with pytest.raises(RuntimeError, match="model.safetensors"):
        linformer.Model(str(tmp_path))


def test_bad_constructor_arguments(tiny_model):
    with pytest.raises(ValueError, match='"f32", "bf16" or "int8"'):
        linformer.Model(tiny_model, precision="fp16")
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ValueError, match="threads"):
            linformer.Model(tiny_model, threads=bad)


@pytest.mark.parametrize("ids, message", [
    (np.zeros((2, 4), np.float32), "integer array"),
    (np.zeros((2, 4), np.complex64), "integer array"),
    (np.array([["a", "b"]]), "integer array"),
    (np.array([[1, None]], dtype=object), "integer array"),
    (np.zeros((2, 4), bool), "integer array"),
    (np.zeros(4, np.int32), "2 dimensions"),
    (np.zeros((1, 2, 4), np.int32), "2 dimensions"),
    (np.zeros((0, 4), np.int32), "empty batch"),
    (np.zeros((2, 0), np.int32), "empty batch"),
    (np.zeros((1, 17), np.int32), "exceeds the model's max_len 16"),
    (np.array([[1, 37]]), r"ids\[0, 1\] = 37 is outside the vocabulary \[0, 37\)"),
    (np.array([[1, -1]]), r"ids\[0, 1\] = -1 is outside"),
    (np.array([[2**40]], np.int64), "outside the vocabulary"),
    (np.array([[2**64 - 1]], np.uint64), "outside the vocabulary"),
    ([[1, 2], [3]], "not an array|integer array"),
])
def test_bad_ids_raise_value_error(tiny, ids, message):
    with pytest.raises(ValueError, match=message):
        tiny.forward(ids)


@pytest.mark.parametrize("mask, message", [
    (np.ones((2, 3)), r"attention_mask has shape \(2, 3\) but ids has \(2, 4\)"),
    (np.ones(8), "attention_mask has shape"),
    (np.full((2, 4), 2), r"attention_mask\[0, 0\] = 2"),
    (np.full((2, 4), np.nan), "must hold 0"),
    (np.array([["1"] * 4] * 2), "integer, bool or float"),
])
def test_bad_masks_raise_value_error(tiny, mask, message):
    with pytest.raises(ValueError, match=message):
        tiny.forward(np.zeros((2, 4), np.int32), mask)


def test_other_bad_arguments(tiny, classifier):
    c = linformer.Model(classifier)
    ids = np.zeros((1, 4), np.int32)
    with pytest.raises(ValueError, match="no tokenizer"):
        tiny.embed(["some text"])
    with pytest.raises(ValueError, match="not a classifier"):
        tiny.classify(["some text"])
    with pytest.raises(ValueError, match="pooling"):
        tiny.embed(ids, pooling="max")
    with pytest.raises(ValueError, match="padding must come last"):
        tiny.embed(np.zeros((1, 3), np.int32), attention_mask=np.array([[1, 0, 1]]))
    with pytest.raises(ValueError, match="empty"):
        c.classify([])
    with pytest.raises(ValueError, match="inputs is empty"):
        c.embed([])
    for bad in (np.array("good"), b"good", 3, None):
        with pytest.raises(ValueError, match="texts"):
            c.classify(bad)
    with pytest.raises(ValueError, match="lowercase"):
        c.tokenize("good", lowercase=1)
    with pytest.raises(ValueError, match=r"texts\[1\] is a int"):
        c.classify(["good", 3])
    with pytest.raises(ValueError, match="UTF-8"):
        c.predict(["\ud800"])
    with pytest.raises(ValueError, match="truncate"):
        c.tokenize("good", truncate="middle")
    with pytest.raises(ValueError, match="max_len"):
        c.tokenize("good", max_len=10**6)
    with pytest.raises(ValueError, match="batch_size"):
        c.classify(["good"], batch_size=0)
    with pytest.raises(ValueError, match="pairs holds 1 texts"):
        c.tokenize(["a", "b"], pairs=["c"])
    with pytest.raises(ValueError, match="single texts"):
        c.classify(["a"], pairs=["b"])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        c.tokenizer.decode([0, 10**6])
    with pytest.raises(ValueError, match="config must be a dict"):
        linformer.init("vocab_size=3")
    with pytest.raises(ValueError, match="nonsense"):
        linformer.init({"nonsense": 1})
    with pytest.raises(ValueError, match="d_model"):
        linformer.init({"d_model": 15})


def test_training_option_errors(tmp_path, data):
    with pytest.raises(ValueError, match="unknown option 'learning_rate'"):
        linformer.finetune(train=data["train"], out=str(tmp_path / "r"), learning_rate=1)
    with pytest.raises(ValueError, match="--lr must be positive"):
        linformer.finetune(train=data["train"], out=str(tmp_path / "r"), lr=-1.0)
    with pytest.raises(ValueError, match="option 'epochs' must be an int"):
        linformer.finetune(train=data["train"], out=str(tmp_path / "r"), epochs=1.5)
    with pytest.raises(ValueError, match="option 'train' must be a str"):
        linformer.finetune(train=3, out=str(tmp_path / "r"))
    with pytest.raises(ValueError, match="out"):
        linformer.pretrain(train=data["texts"], config="x.json")
    with pytest.raises(ValueError, match="int8 is for inference only"):
        linformer.finetune(train=data["train"], out=str(tmp_path / "r"), precision="int8")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        linformer.pretrain(train=str(tmp_path / "nope.txt"), init_from=str(tmp_path),
                           out=str(tmp_path / "r"))
    with pytest.raises(FileNotFoundError, match="run folder"):
        linformer.finetune(out=str(tmp_path / "none"), resume=True)
    assert not os.path.exists(tmp_path / "r")


def test_engine_errors_keep_their_message(tmp_path, data):
    # A run folder that holds a run: the engine refuses, RuntimeError with its message.
    run = tmp_path / "r"
    run.mkdir()
    (run / "train_args.json").write_text("{}")
    with pytest.raises(RuntimeError, match="already holds a run"):
        linformer.finetune(train=data["train"], out=str(run), vocab_size=40, quiet=True)


DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64, np.complex64, bool, object, "U3"]


def test_random_inputs_never_crash(tiny):
    """Random dtypes, shapes and values: either a result of the right shape or ValueError."""
    rng = np.random.default_rng(0)
    results = errors = 0
    ints = DTYPES[:8]
    for it in range(400):
        # Half the time something close to valid, so that both outcomes are exercised.
        dtype = ints[rng.integers(len(ints))] if rng.random() < 0.6 else DTYPES[rng.integers(len(DTYPES))]
        rank = 2 if rng.random() < 0.7 else int(rng.integers(0, 4))
        shape = tuple(int(s) for s in rng.integers(0 if rng.random() < 0.1 else 1, 19, size=rank))
        high = 37 if rng.random() < 0.8 else 300
        values = rng.integers(-2 if rng.random() < 0.1 else 0, high, size=shape)
        ids = values.astype(dtype)
        mask = None
        if rng.random() < 0.5:
            mshape = shape if rng.random() < 0.8 else tuple(int(s) for s in rng.integers(0, 19, size=2))
            mdtype = DTYPES[rng.integers(len(DTYPES))] if rng.random() < 0.3 else np.int32
            mvals = rng.integers(0, 2 + (rng.random() < 0.1), size=mshape)
            if rng.random() < 0.5 and len(mshape) == 2:
                # padding last: a prefix of ones per row
                lens = rng.integers(1, max(mshape[1], 1) + 1, size=mshape[0])
                mvals = (np.arange(mshape[1])[None, :] < lens[:, None]).astype(int)
            mask = mvals.astype(mdtype)
        try:
            if rng.random() < 0.5:
                out = tiny.forward(ids, mask)["hidden_states"]
                assert out.shape == (*np.shape(ids), 16)
            else:
                out = tiny.embed(ids, attention_mask=mask, pooling=["cls", "mean"][it % 2])
                assert out.shape == (np.shape(ids)[0], 16)
            # A fully masked row is allowed in forward (zeros of attention); values stay finite.
            assert np.isfinite(out).all()
            results += 1
        except ValueError:
            errors += 1
    assert results > 50 and errors > 50, (results, errors)


def test_random_texts_never_crash(classifier):
    c = linformer.Model(classifier)
    rng = np.random.default_rng(1)
    for _ in range(100):
        n = int(rng.integers(1, 5))
        texts = ["".join(chr(int(x)) for x in rng.integers(1, 0x3000, size=rng.integers(0, 80)))
                 for _ in range(n)]
        p = c.classify(texts)
        assert p.shape == (n, 2) and np.allclose(p.sum(axis=1), 1, atol=1e-5)
