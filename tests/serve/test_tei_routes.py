#!/usr/bin/env python3
"""TEI's routes beyond /embed and /predict, as clients see them over real HTTP on loopback:
POST / and /invocations (the model's own route), GET /ping, POST /embeddings, /embed_all
(against `linformer forward`'s hidden states), /decode (round trip through /tokenize) and
/rerank (against `linformer predict` on the same pairs); each with a normal request, a batch
and every bad input (status and TEI's error shape); a route the model cannot serve (424);
run folders given to --model; no Nagle stall on a keep-alive connection.
Usage: LINFORMER_BIN=build/linformer test_tei_routes.py [unittest options]"""
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util as su  # noqa: E402

ROOT = None
MODEL = PAIRS = ENCODER = None

TEXTS = ["the movie was good", "bad", "really bad plot and acting , the film was very bad",
         "good good good film , really very good acting and plot", "the plot"]
LONG = " ".join(["film"] * 200)  # more tokens than max_len = 64


def setUpModule():
    global ROOT, MODEL, PAIRS, ENCODER
    ROOT, MODEL, PAIRS, ENCODER = su.make_models("lf_tei_test_")


def tearDownModule():
    shutil.rmtree(ROOT, ignore_errors=True)


class ErrorShape:
    def assertError(self, got, status, error_type, route=""):
        code, body = got
        self.assertEqual(code, status, f"{route}: {body}")
        self.assertEqual(set(body), {"error", "error_type"}, route)
        self.assertEqual(body["error_type"], error_type, route)
        self.assertTrue(body["error"], route)


class SingleTextClassifier(su.ServerCase, ErrorShape):
    model = staticmethod(lambda: MODEL)

    def test_ping_info_and_openapi(self):
        status, _, body = self.s.request("GET", "/ping")
        self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}))
        info = json.loads(self.s.request("GET", "/info")[2])
        self.assertEqual(info["root_route"], "/predict")
        self.assertIsNone(info["rerank_label"])
        doc = json.loads(self.s.request("GET", "/openapi.json")[2])
        for route in ["/", "/invocations", "/ping", "/embeddings", "/embed_all", "/decode", "/rerank"]:
            self.assertIn(route, doc["paths"])

    def test_root_and_invocations_predict(self):
        _, want = self.s.post("/predict", {"inputs": TEXTS})
        for route in ["/", "/invocations"]:
            self.assertEqual(self.s.post(route, {"inputs": TEXTS}), (200, want))
            self.assertEqual(self.s.post(route, {"inputs": TEXTS[0]}), (200, want[0]))
            self.assertError(self.s.post(route, {"inputs": []}), 422, "validation", route)

    def test_embeddings_without_v1(self):
        body = {"input": TEXTS[:3], "model": "m"}
        self.assertEqual(self.s.post("/embeddings", body), self.s.post("/v1/embeddings", body))
        self.assertError(self.s.post("/embeddings", {"input": [1, 2]}), 422, "validation")

    def test_embed_all_against_forward(self):
        status, toks = self.s.post("/tokenize", {"inputs": TEXTS[:3]})
        self.assertEqual(status, 200)
        status, out = self.s.post("/embed_all", {"inputs": TEXTS[:3]})
        self.assertEqual(status, 200)
        self.assertEqual(len(out), 3)
        for i, (vecs, tok) in enumerate(zip(out, toks)):
            ids = [t["id"] for t in tok]  # special tokens included, as TEI's embed_all
            self.assertEqual(len(vecs), len(ids))
            self.assertTrue(all(len(v) == 32 for v in vecs))
            inp, res = os.path.join(ROOT, f"ids{i}.safetensors"), os.path.join(ROOT, f"h{i}.safetensors")
            su.write_safetensors(inp, {"input_ids": ("I32", [1, len(ids)], ids)})
            su.run(["forward", "--model", MODEL, "--input", inp, "--out", res, "--no-logits"])
            shape, h = su.read_safetensors_f32(res, "hidden_states")
            self.assertEqual(shape, [1, len(ids), 32])
            scale = max(abs(x) for x in h)
            got = [x for v in vecs for x in v]
            self.assertLess(max(abs(a - b) for a, b in zip(got, h)), 1e-5 * scale)
        # The first token's vector is /embed's cls vector, the mean of all is its mean (same
        # padded length, so bitwise / to float rounding).
        _, cls = self.s.post("/embed", {"inputs": TEXTS[:3], "normalize": False, "pooling": "cls"})
        _, mean = self.s.post("/embed", {"inputs": TEXTS[:3], "normalize": False, "pooling": "mean"})
        for vecs, c, m in zip(out, cls, mean):
            self.assertEqual(vecs[0], c)
            for j in range(32):
                self.assertAlmostEqual(sum(v[j] for v in vecs) / len(vecs), m[j], delta=1e-5)
        # A single string: still a list (per input) of lists (per token).
        status, one = self.s.post("/embed_all", {"inputs": TEXTS[0]})
        self.assertEqual((status, one), (200, out[:1]))
        # Truncation: to max_len tokens, from either end.
        status, cut = self.s.post("/embed_all", {"inputs": LONG, "truncate": True})
        self.assertEqual((status, len(cut[0])), (200, 64))

    def test_embed_all_errors(self):
        for body in [b"not json", {}, {"inputs": 5}, {"inputs": ""}, {"inputs": []},
                     {"inputs": [["nested"]]}, {"inputs": ["x"] * 33}, {"inputs": LONG},
                     {"inputs": "x", "truncation_direction": "up"}, {"inputs": "x", "truncate": 1}]:
            self.assertError(self.s.post("/embed_all", body), 422, "validation", str(body)[:60])

    def test_decode_round_trip(self):
        plain = ["the movie was good", "bad plot and acting", "good"]
        status, toks = self.s.post("/tokenize", {"inputs": plain})
        ids = [[t["id"] for t in tok] for tok in toks]
        status, texts = self.s.post("/decode", {"ids": ids})
        self.assertEqual((status, texts), (200, plain))
        status, one = self.s.post("/decode", {"ids": ids[0]})  # one sequence: still a list
        self.assertEqual((status, one), (200, plain[:1]))
        status, kept = self.s.post("/decode", {"ids": ids[0], "skip_special_tokens": False})
        self.assertEqual(status, 200)
        self.assertTrue(kept[0].startswith("<s>") and kept[0].endswith("</s>"), kept)
        self.assertEqual(kept[0][3:-4].strip(), plain[0])
        self.assertEqual(self.s.post("/decode", {"ids": []}), (200, [""]))

    def test_decode_errors(self):
        for body in [b"{", {}, {"ids": "1 2"}, {"ids": [1.5]}, {"ids": [-1]}, {"ids": [10 ** 9]},
                     {"ids": [10 ** 30]}, {"ids": [[1], "x"]}, {"ids": [[1], [2.0]]},
                     {"ids": [[1]] * 33}, {"ids": [1], "skip_special_tokens": "no"}]:
            self.assertError(self.s.post("/decode", body), 422, "validation", str(body)[:60])

    def test_rerank_on_a_single_text_classifier_is_424(self):
        self.assertError(self.s.post("/rerank", {"query": "q", "texts": ["a"]}), 424, "backend")

    def test_no_nagle_stall_on_keep_alive(self):
        # httplib writes headers and body apart; with Nagle on, the second write waited for the
        # client's delayed ACK (~40 ms). One keep-alive connection, sequential requests.
        c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=30)
        try:
            times = []
            for i in range(40):
                t = time.perf_counter()
                c.request("POST", "/tokenize", body=json.dumps({"inputs": "good"}),
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                self.assertEqual(r.status, 200)
                times.append(time.perf_counter() - t)
        finally:
            c.close()
        self.assertLess(statistics.median(times), 0.015, times)

    def test_a_burst_of_new_connections_is_accepted_at_once(self):
        # httplib's listen backlog of 5 made most of 64 simultaneous connections wait for the
        # client kernel's SYN retry (1 s, then 3 s); the server now listens with a larger one.
        n = 64
        times = [None] * n
        barrier = threading.Barrier(n)

        def one(i):
            barrier.wait(timeout=60)
            t = time.perf_counter()
            c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=30)
            try:
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                times[i] = (time.perf_counter() - t, r.status)
            finally:
                c.close()

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.assertTrue(all(t is not None and t[1] == 200 for t in times), times)
        slow = [t[0] for t in times if t[0] >= 0.9]
        self.assertEqual(slow, [], f"{len(slow)} of {n} connections took a SYN retry")


class PairClassifier(su.ServerCase, ErrorShape):
    model = staticmethod(lambda: PAIRS)

    QUERY = "the plot"
    DOCS = ["it was good", "really bad acting", "good good film", "bad", "the movie was very good"]

    def test_rerank_matches_predict(self):
        info = json.loads(self.s.request("GET", "/info")[2])
        self.assertEqual(info["rerank_label"], "1")  # the rule: a label named 1
        self.assertEqual(info["root_route"], "/predict")
        cli = su.cli_lines(ROOT, "predict", PAIRS, [f"{self.QUERY}\t{d}" for d in self.DOCS])
        status, ranks = self.s.post("/rerank", {"query": self.QUERY, "texts": self.DOCS})
        self.assertEqual(status, 200)
        self.assertEqual(sorted(r["index"] for r in ranks), list(range(len(self.DOCS))))
        scores = [r["score"] for r in ranks]
        self.assertEqual(scores, sorted(scores, reverse=True))
        for r in ranks:
            self.assertEqual(set(r), {"index", "score"})
            self.assertAlmostEqual(r["score"], cli[r["index"]]["probs"]["1"], delta=2e-6)
        # raw_scores: the relevant class's logit, as /predict's raw scores.
        status, raw = self.s.post("/rerank", {"query": self.QUERY, "texts": self.DOCS, "raw_scores": True})
        _, logits = self.s.post("/predict", {"inputs": [[self.QUERY, d] for d in self.DOCS], "raw_scores": True})
        for r in raw:
            want = [p["score"] for p in logits[r["index"]] if p["label"] == "1"][0]
            self.assertAlmostEqual(r["score"], want, delta=1e-6)
        self.assertEqual([r["index"] for r in raw], [r["index"] for r in ranks])
        # return_text, and one text.
        status, with_text = self.s.post("/rerank", {"query": self.QUERY, "texts": self.DOCS, "return_text": True})
        for r in with_text:
            self.assertEqual(r["text"], self.DOCS[r["index"]])
        status, one = self.s.post("/rerank", {"query": self.QUERY, "texts": [self.DOCS[1]]})
        self.assertEqual((status, len(one), one[0]["index"]), (200, 1, 0))
        # Truncation of a long text, from either end.
        for d in ["right", "left"]:
            status, cut = self.s.post("/rerank", {"query": self.QUERY, "texts": [LONG, "good"],
                                                  "truncate": True, "truncation_direction": d})
            self.assertEqual((status, len(cut)), (200, 2))

    def test_rerank_errors(self):
        q = self.QUERY
        for body in [b"[]", {}, {"query": q}, {"texts": ["a"]}, {"query": "", "texts": ["a"]},
                     {"query": 5, "texts": ["a"]}, {"query": q, "texts": []},
                     {"query": q, "texts": "a"}, {"query": q, "texts": ["a", 3]},
                     {"query": q, "texts": [["a", "b"]]}, {"query": q, "texts": ["a"] * 33},
                     {"query": q, "texts": [LONG]}, {"query": LONG, "texts": ["a"]},
                     {"query": q, "texts": ["a"], "raw_scores": "yes"},
                     {"query": q, "texts": ["a"], "return_text": 1},
                     {"query": q, "texts": ["a"], "truncation_direction": 2},
                     b'{"query": "\xff", "texts": ["a"]}']:
            self.assertError(self.s.post("/rerank", body), 422, "validation", str(body)[:60])

    def test_root_route_rerank_and_label_override(self):
        with su.Server(PAIRS, "--root-route", "rerank", "--rerank-label", "0") as s:
            info = json.loads(s.request("GET", "/info")[2])
            self.assertEqual((info["root_route"], info["rerank_label"]), ("/rerank", "0"))
            body = {"query": self.QUERY, "texts": self.DOCS}
            _, by1 = self.s.post("/rerank", body)
            for route in ["/", "/invocations", "/rerank"]:
                status, by0 = s.post(route, body)
                self.assertEqual(status, 200)
                p1 = {r["index"]: r["score"] for r in by1}
                for r in by0:  # two classes: P(0) = 1 - P(1)
                    self.assertAlmostEqual(r["score"], 1 - p1[r["index"]], delta=1e-6)

    def test_options_that_do_not_fit_the_model_stop_the_server(self):
        for model, args, words in [(PAIRS, ["--rerank-label", "nope"], "no such label"),
                                   (MODEL, ["--rerank-label", "1"], "not a pair classifier"),
                                   (MODEL, ["--root-route", "rerank"], "not a pair classifier"),
                                   (ENCODER, ["--root-route", "predict"], "not a classifier")]:
            with su.Server(model, *args, wait=False) as s:
                self.assertEqual(s.proc.wait(timeout=120), 1)
                self.assertIn(words, s.stderr())


class Encoder(unittest.TestCase, ErrorShape):
    def test_root_embeds_and_classifier_routes_are_424(self):
        with su.Server(ENCODER) as s:
            self.assertEqual(json.loads(s.request("GET", "/info")[2])["root_route"], "/embed")
            _, want = s.post("/embed", {"inputs": TEXTS})
            for route in ["/", "/invocations"]:
                self.assertEqual(s.post(route, {"inputs": TEXTS}), (200, want))
            self.assertError(s.post("/predict", {"inputs": "good"}), 424, "backend")
            self.assertError(s.post("/rerank", {"query": "q", "texts": ["a"]}), 424, "backend")
            status, out = s.post("/embed_all", {"inputs": ["good", "bad plot"]})
            self.assertEqual((status, len(out)), (200, 2))


class RunFolders(unittest.TestCase):
    def test_serve_and_predict_take_a_run_folder(self):
        run = os.path.dirname(MODEL)  # finetune's --out: best/ inside
        with su.Server(run) as s:
            self.assertIn("is a run folder: using its best model", s.stderr())
            info = json.loads(s.request("GET", "/info")[2])
            self.assertEqual(info["model_id"], "run")
            _, got = s.post("/predict", {"inputs": TEXTS})
        ref = su.cli_lines(ROOT, "predict", MODEL, TEXTS)
        via_run = su.cli_lines(ROOT, "predict", run, TEXTS)
        self.assertEqual(via_run, ref)
        for mine, r in zip(got, ref):
            self.assertEqual(mine[0]["label"], r["label"])
        p = subprocess.run([su.BIN, "info", "--model", run], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(os.path.join(run, "best"), p.stderr)

    def test_a_run_without_best_gives_its_last_model(self):
        run = os.path.join(ROOT, "pretrain_like")
        shutil.copytree(ENCODER, os.path.join(run, "model"))
        p = subprocess.run([su.BIN, "info", "--model", run], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("using its last model", p.stderr)
        # finetune --init-from takes a (pretrain) run folder the same way.
        with open(os.path.join(ROOT, "ft_train.tsv"), "w") as f:
            f.write(su.tsv_rows(32, 1))
        p = subprocess.run([su.BIN, "finetune", "--init-from", run, "--train",
                            os.path.join(ROOT, "ft_train.tsv"), "--out", os.path.join(ROOT, "ft_run"),
                            "--epochs", "1", "--batch-size", "16", "--quiet"],
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("--init-from " + run + " is a run folder: using its last model", p.stderr)
        empty = os.path.join(ROOT, "empty_run")
        os.makedirs(empty)
        p = subprocess.run([su.BIN, "info", "--model", empty], capture_output=True, text=True, timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("has no model.safetensors", p.stderr)


if __name__ == "__main__":
    unittest.main()
