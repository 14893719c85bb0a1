"""Python threads calling the engine at once give the results of calling it one after the
other: two threads on one Model (serialised by its lock) and on two Models (in parallel, the
GIL released)."""
import threading
import time

import numpy as np

import linformer


def batches(V, n, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, V, size=(int(rng.integers(1, 5)), int(rng.integers(1, 17))))
            for _ in range(n)]


def run_in_threads(work):
    """Runs each function of `work` in its own thread; returns their results."""
    results = [None] * len(work)
    errors = []
    start = threading.Barrier(len(work))

    def body(i):
        try:
            start.wait()
            results[i] = work[i]()
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(work))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_two_threads_on_one_model_equal_sequential(tiny_model):
    m = linformer.Model(tiny_model)
    work = [batches(37, 25, s) for s in (1, 2)]
    want = [[m.forward(ids)["mlm_logits"] for ids in w] for w in work]
    got = run_in_threads([lambda w=w: [m.forward(ids)["mlm_logits"] for ids in w] for w in work])
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)


def test_two_models_in_two_threads_equal_sequential(tiny_model, classifier, data):
    a, b = linformer.Model(tiny_model), linformer.Model(classifier)
    ids = batches(37, 20, 3)
    texts = data["dev_texts"]
    want_a = [a.forward(x)["hidden_states"] for x in ids]
    want_b = [b.embed(texts[i:i + 8], pooling="mean") for i in range(0, 64, 8)]
    got_a, got_b = run_in_threads([
        lambda: [a.forward(x)["hidden_states"] for x in ids],
        lambda: [b.embed(texts[i:i + 8], pooling="mean") for i in range(0, 64, 8)]])
    for x, y in zip(got_a + got_b, want_a + want_b):
        np.testing.assert_array_equal(x, y)


def test_the_gil_is_released_during_compute(workdir):
    """While one thread runs a long forward pass, another thread keeps running Python."""
    m = linformer.init({"vocab_size": 100, "max_len": 512, "d_model": 128, "n_heads": 2,
                        "d_ff": 256, "n_layers": 2, "k": [64]}, seed=1)
    ids = np.random.default_rng(0).integers(0, 100, size=(16, 512))
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    t0 = time.perf_counter()
    for _ in range(3):
        m.forward(ids, logits=False)
    elapsed = time.perf_counter() - t0
    done.set()
    t.join()
    during = [x for x in ticks if t0 <= x <= t0 + elapsed]
    # With the GIL held the ticker stalls for each whole call (a tick or two between calls);
    # released, it ticks on.
    assert len(during) >= 20, (len(during), elapsed)
