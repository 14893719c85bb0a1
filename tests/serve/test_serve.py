#!/usr/bin/env python3
"""`linformer serve` as its clients see it: real HTTP on a loopback port to the real program.
Every route, every error status, batching with concurrent clients (results equal to
`linformer predict` / `embed`, and bitwise the same alone and in any batch), a client that
leaves mid-request, the payload and in-flight limits, the API key, and SIGTERM with requests
in flight.
Usage: LINFORMER_BIN=build/linformer test_serve.py [unittest options]"""
import base64
import json
import math
import os
import random
import shutil
import signal
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util as su  # noqa: E402

ROOT = None
MODEL = PAIRS = ENCODER = None

TEXTS = [
    "the movie was good",
    "bad",
    "really bad plot and acting , the film was very bad",
    "it was good",
    "good good good film , really very good acting and plot",
    "the plot",
    "an utterly ordinary movie",
    "Ünïcode tèxt — with “quotes” and 日本語",
    "very very bad and the acting was bad and the plot was bad and it really was a bad film",
    "good",
]


def setUpModule():
    global ROOT, MODEL, PAIRS, ENCODER
    ROOT, MODEL, PAIRS, ENCODER = su.make_models("lf_serve_test_")


def tearDownModule():
    shutil.rmtree(ROOT, ignore_errors=True)


class Routes(su.ServerCase):
    model = staticmethod(lambda: MODEL)

    def test_health_info_openapi_page(self):
        status, _, body = self.s.request("GET", "/health")
        self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}))
        status, _, body = self.s.request("GET", "/info")
        info = json.loads(body)
        self.assertEqual(status, 200)
        self.assertEqual(info["labels"], ["negative", "positive"])
        self.assertEqual(info["model_type"]["classifier"]["id2label"], {"0": "negative", "1": "positive"})
        self.assertEqual(info["precision"], "f32")
        self.assertEqual(info["max_input_length"], 64)
        self.assertEqual(info["max_batch_tokens"], 16384)
        self.assertEqual(info["max_client_batch_size"], 32)
        self.assertEqual(info["config"]["d_model"], 32)
        self.assertTrue(info["version"])
        status, headers, body = self.s.request("GET", "/openapi.json")
        doc = json.loads(body)
        for route in ["/embed", "/predict", "/tokenize", "/v1/embeddings", "/info", "/health", "/metrics"]:
            self.assertIn(route, doc["paths"])
        status, headers, body = self.s.request("GET", "/")
        self.assertEqual(status, 200)
        self.assertIn("text/html", headers["content-type"])
        self.assertIn(b'id="classify"', body)

    def test_predict_matches_cli(self):
        cli = su.cli_lines(ROOT, "predict", MODEL, TEXTS)
        status, out = self.s.post("/predict", {"inputs": TEXTS})
        self.assertEqual(status, 200)
        self.assertEqual(len(out), len(TEXTS))
        for mine, ref in zip(out, cli):
            self.assertEqual(mine[0]["label"], ref["label"])
            self.assertGreaterEqual(mine[0]["score"], mine[1]["score"])  # sorted by score
            for p in mine:
                self.assertAlmostEqual(p["score"], ref["probs"][p["label"]], delta=2e-6)
        # A single string: TEI's single answer (a list of predictions, not a list of lists).
        status, one = self.s.post("/predict", {"inputs": TEXTS[0]})
        self.assertEqual([p["label"] for p in one], [p["label"] for p in out[0]])
        # raw_scores: logits, whose softmax is the probabilities.
        status, raw = self.s.post("/predict", {"inputs": [[t] for t in TEXTS[:3]], "raw_scores": True})
        for logits, probs in zip(raw, out):
            z = {p["label"]: p["score"] for p in logits}
            m = max(z.values())
            s = sum(math.exp(v - m) for v in z.values())
            for p in probs:
                self.assertAlmostEqual(math.exp(z[p["label"]] - m) / s, p["score"], delta=1e-6)

    def test_embed_matches_cli(self):
        cli = su.cli_lines(ROOT, "embed", MODEL, TEXTS, "--pool", "both")
        for pooling in ["cls", "mean"]:
            status, out = self.s.post("/embed", {"inputs": TEXTS, "normalize": False, "pooling": pooling})
            self.assertEqual(status, 200)
            for mine, ref in zip(out, cli):
                ref = ref[pooling]
                scale = max(abs(v) for v in ref)
                self.assertEqual(len(mine), 32)
                self.assertLess(max(abs(a - b) for a, b in zip(mine, ref)), 1e-5 * scale)
        status, out = self.s.post("/embed", {"inputs": TEXTS[1]})  # normalize: true by default
        self.assertAlmostEqual(sum(v * v for v in out[0]), 1.0, places=5)

    def test_openai_embeddings(self):
        status, raw = self.s.post("/embed", {"inputs": TEXTS[:3]})
        status, out = self.s.post("/v1/embeddings", {"input": TEXTS[:3], "model": "m"})
        self.assertEqual(status, 200)
        self.assertEqual(out["object"], "list")
        self.assertEqual(out["model"], "m")
        self.assertEqual([d["index"] for d in out["data"]], [0, 1, 2])
        self.assertGreater(out["usage"]["prompt_tokens"], 3)
        for d, ref in zip(out["data"], raw):
            self.assertEqual(d["object"], "embedding")
            self.assertEqual(d["embedding"], ref)
        status, b64 = self.s.post("/v1/embeddings", {"input": TEXTS[:3], "encoding_format": "base64"})
        for d, ref in zip(b64["data"], raw):
            self.assertEqual(base64.b64decode(d["embedding"]), struct.pack("<32f", *ref))
        status, short = self.s.post("/v1/embeddings", {"input": TEXTS[0], "dimensions": 8})
        v = short["data"][0]["embedding"]
        self.assertEqual(len(v), 8)
        self.assertAlmostEqual(sum(x * x for x in v), 1.0, places=5)

    def test_tokenize(self):
        status, out = self.s.post("/tokenize", {"inputs": ["the movie", "good"]})
        self.assertEqual(status, 200)
        self.assertEqual(len(out), 2)
        self.assertEqual(out[0][0], {"id": 0, "text": "<s>", "special": True, "start": None, "stop": None})
        self.assertEqual(out[0][-1]["id"], 2)
        self.assertTrue(all(not t["special"] for t in out[0][1:-1]))
        status, plain = self.s.post("/tokenize", {"inputs": "the movie", "add_special_tokens": False})
        self.assertEqual([t["id"] for t in plain[0]], [t["id"] for t in out[0][1:-1]])

    def test_validation_errors(self):
        long_text = " ".join(["good"] * 200)
        cases = [
            ("/embed", b"not json"),
            ("/embed", b"[1, 2]"),
            ("/embed", {}),
            ("/embed", {"inputs": 5}),
            ("/embed", {"inputs": ""}),
            ("/embed", {"inputs": []}),
            ("/embed", {"inputs": ["a", 3]}),
            ("/embed", {"inputs": [["nested"]]}),
            ("/embed", {"inputs": ["x"] * 33}),
            ("/embed", {"inputs": long_text}),
            ("/embed", {"inputs": "x", "normalize": "yes"}),
            ("/embed", {"inputs": "x", "pooling": "max"}),
            ("/embed", {"inputs": "x", "truncation_direction": "up"}),
            ("/embed", b'{"inputs": "\xff\xfe bad utf-8"}'),
            ("/embed", b'{"inputs": ["ok", "\xed\xa0\x80 a surrogate"]}'),
            ("/predict", b'{"inputs": "\xc0\xaf overlong"}'),
            ("/predict", {"inputs": [["a", "b"]]}),  # a pair, to a single-text classifier
            ("/predict", {"inputs": [["a", "b", "c"]]}),
            ("/predict", {"inputs": ["a", ["b"]]}),
            ("/predict", {"inputs": long_text}),
            ("/tokenize", {"inputs": None}),
            ("/v1/embeddings", {"input": [[1, 2, 3]]}),
            ("/v1/embeddings", {"input": "x", "dimensions": 1000}),
            ("/v1/embeddings", {"input": "x", "encoding_format": "hex"}),
        ]
        for path, body in cases:
            with self.subTest(path=path, body=body):
                status, headers, data = self.s.request("POST", path, body)
                self.assertEqual(status, 422, data)
                err = json.loads(data)
                self.assertEqual(err["error_type"], "validation")
                self.assertTrue(err["error"])
        # The same long input is accepted when truncated, from either end.
        for direction in ["right", "left"]:
            status, out = self.s.post("/embed", {"inputs": long_text, "truncate": True,
                                                 "truncation_direction": direction})
            self.assertEqual(status, 200)
        status, headers, data = self.s.request("GET", "/no/such/route")
        self.assertEqual((status, json.loads(data)["error_type"]), (404, "not_found"))

    def test_metrics(self):
        before = self.s.metrics()
        self.s.post("/embed", {"inputs": TEXTS[:2]})
        self.s.request("POST", "/embed", b"{")
        m = self.s.metrics()
        key = 'linformer_request_count{route="/embed"}'
        self.assertEqual(m[key], before.get(key, 0) + 2)
        key = 'linformer_request_failure{route="/embed",err="validation"}'
        self.assertEqual(m[key], before.get(key, 0) + 1)
        for name in ["linformer_request_duration_seconds_count", "linformer_request_queue_duration_seconds_count",
                     "linformer_request_inference_duration_seconds_count",
                     "linformer_request_tokenization_duration_seconds_count",
                     "linformer_batch_size_count", "linformer_batch_tokens_count",
                     "linformer_queue_size", "process_resident_memory_bytes"]:
            self.assertIn(name, m)
        self.assertGreater(m["process_resident_memory_bytes"], 1e6)
        self.assertEqual(m['linformer_batch_size_bucket{le="+Inf"}'], m["linformer_batch_size_count"])


    def test_malformed_http_and_slow_clients_do_not_disturb_others(self):
        for raw in [b"GARBAGE\r\n\r\n", b"POST /embed HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                    b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"in"]:
            c = socket.create_connection(("127.0.0.1", self.s.port), timeout=10)
            c.sendall(raw)
            c.shutdown(socket.SHUT_WR)  # and the rest never comes
            reply = b""
            try:
                while chunk := c.recv(4096):
                    reply += chunk
            except OSError:
                pass
            c.close()
            if reply:
                self.assertRegex(reply.split(b"\r\n")[0], rb"HTTP/1\.1 4\d\d")
            self.assertEqual(self.s.post("/embed", {"inputs": "good"})[0], 200)

    def test_log_lines(self):
        self.s.post("/predict", {"inputs": TEXTS[:2]})
        lines = self.s.log_lines(lambda l: " POST /predict 200 " in l)
        self.assertTrue(lines)
        self.assertRegex(lines[-1], r"inputs=\d+ tokens=\d+ queue_ms=[0-9.]+ compute_ms=[0-9.]+ total_ms=[0-9.]+")


class JsonLog(unittest.TestCase):
    def test_json_log_lines(self):
        with su.Server(MODEL, "--log-format", "json") as s:
            s.post("/embed", {"inputs": ["good", "bad plot"]})
            s.post("/embed", {"inputs": []})
            recs = [json.loads(l) for l in s.log_lines(
                lambda l: l.startswith("{") and '"route":"/embed"' in l.replace(" ", ""), count=2)]
            ok = [r for r in recs if r["route"] == "/embed" and r["status"] == 200][0]
            self.assertEqual((ok["method"], ok["inputs"]), ("POST", 2))
            for k in ["tokens", "queue_ms", "compute_ms", "total_ms", "time", "client"]:
                self.assertIn(k, ok)
            bad = [r for r in recs if r["status"] == 422][0]
            self.assertEqual(bad["error_type"], "validation")


class Options(unittest.TestCase):
    def test_no_batch_invariance_is_reported(self):
        with su.Server(MODEL, "--no-batch-invariance") as s:
            info = json.loads(s.request("GET", "/info")[2])
            self.assertFalse(info["batch_invariant"])
            self.assertEqual(s.post("/embed", {"inputs": ["good", "bad"]})[0], 200)


class Precision(unittest.TestCase):
    def assert_close_to_f32(self, s, f, precision, dtype, texts):
        """Server s runs `precision` (dtype in /info) and embeds texts within cosine 0.99 of the
        f32 server f's embeddings, but not equal to them (its products were used)."""
        info = json.loads(s.request("GET", "/info")[2])
        self.assertEqual((info["precision"], info["model_dtype"]), (precision, dtype))
        st, v = s.post("/embed", {"inputs": texts})
        st32, v32 = f.post("/embed", {"inputs": texts})
        self.assertEqual((st, st32), (200, 200))
        for a, b in zip(v, v32):
            self.assertGreater(sum(x * y for x, y in zip(a, b)), 0.99)  # unit vectors
            self.assertNotEqual(a, b)

    def test_bf16_close_to_f32_or_refused_with_the_reason(self):
        try:
            s = su.Server(MODEL, "--precision", "bf16")
        except RuntimeError as e:
            # A CPU without a bf16 matmul: refused before the port is bound, with the reason.
            self.assertIn("bf16 needs AVX-512", str(e))
            self.assertNotIn("listening", str(e))
            return
        f = su.Server(MODEL)
        try:
            self.assert_close_to_f32(s, f, "bf16", "bfloat16",
                                     ["good film", "a really bad plot and acting"])
        finally:
            s.close()
            f.close()


    def test_int8_close_to_f32_and_named_in_info(self):
        s = su.Server(MODEL, "--precision", "int8")
        f = su.Server(MODEL)
        try:
            texts = ["good film", "a really bad plot and acting", "fine"]
            self.assert_close_to_f32(s, f, "int8", "int8", texts)
            st, p8 = s.post("/predict", {"inputs": texts})
            st32, p32 = f.post("/predict", {"inputs": texts})
            self.assertEqual((st, st32), (200, 200))
            for a, b in zip(p8, p32):
                want = {p["label"]: p["score"] for p in b}
                for p in a:
                    self.assertAlmostEqual(p["score"], want[p["label"]], delta=0.05)
        finally:
            s.close()
            f.close()


    def test_float_layers_as_in_the_cli(self):
        # --float-layers keeps those layers' maps in f32 under int8, as every other command:
        # the served embeddings match `linformer embed` with the same options, and differ from
        # the all-int8 ones.
        s = su.Server(MODEL, "--precision", "int8", "--float-layers", "0")
        plain = su.Server(MODEL, "--precision", "int8")
        try:
            info = json.loads(s.request("GET", "/info")[2])
            self.assertEqual((info["precision"], info["float_layers"]), ("int8", [0]))
            cli = su.cli_lines(ROOT, "embed", MODEL, TEXTS, "--pool", "cls", "--precision",
                               "int8", "--float-layers", "0")
            st, out = s.post("/embed", {"inputs": TEXTS, "normalize": False, "pooling": "cls"})
            st8, out8 = plain.post("/embed", {"inputs": TEXTS, "normalize": False, "pooling": "cls"})
            self.assertEqual((st, st8), (200, 200))
            for mine, ref, all8 in zip(out, cli, out8):
                ref = ref["cls"]
                scale = max(abs(v) for v in ref)
                self.assertLess(max(abs(a - b) for a, b in zip(mine, ref)), 1e-5 * scale)
                self.assertNotEqual(mine, all8)
        finally:
            s.close()
            plain.close()
        bad = su.Server(MODEL, "--precision", "int8", "--float-layers", "7", wait=False)
        try:
            self.assertEqual(bad.proc.wait(timeout=60), 1)
            self.assertIn("layer 7 does not exist (the model has 2 layers", bad.stderr())
        finally:
            bad.close()


class Pairs(unittest.TestCase):
    def test_pair_classifier(self):
        with su.Server(PAIRS) as s:
            pairs = [["the plot", "it was good"], ["film", "really bad acting"]]
            cli = su.cli_lines(ROOT, "predict", PAIRS, ["\t".join(p) for p in pairs])
            status, one = s.post("/predict", {"inputs": pairs[0]})  # TEI: [a, b] is one pair
            self.assertEqual(status, 200)
            self.assertEqual(one[0]["label"], cli[0]["label"])
            status, both = s.post("/predict", {"inputs": pairs})
            for mine, ref in zip(both, cli):
                for p in mine:
                    self.assertAlmostEqual(p["score"], ref["probs"][p["label"]], delta=2e-6)
            status, err = s.post("/predict", {"inputs": "just one text"})
            self.assertEqual(status, 422)

    def test_encoder_only_model(self):
        with su.Server(ENCODER) as s:
            status, err = s.post("/predict", {"inputs": "good"})
            self.assertEqual((status, err["error_type"]), (424, "backend"))  # as TEI
            status, out = s.post("/embed", {"inputs": ["good", "bad"]})
            self.assertEqual((status, len(out)), (200, 2))
            status, _, body = s.request("GET", "/info")
            self.assertIn("embedding", json.loads(body)["model_type"])


class Batching(unittest.TestCase):
    def test_same_answer_alone_and_in_any_batch(self):
        # Requests wait up to 50 ms for company, so concurrent clients share batches.
        with su.Server(MODEL, "--batch-wait-ms", "50") as s:
            if not json.loads(s.request("GET", "/info")[2])["batch_invariant"]:
                self.skipTest("this build's engine does not promise batch-invariant results")
            texts = TEXTS + [" ".join(["good", "film"] * n) for n in range(1, 12)]
            alone_e, alone_p = {}, {}
            for t in texts:  # one at a time: batches of one
                alone_e[t] = s.request("POST", "/embed", {"inputs": [t], "normalize": False})[2]
                alone_p[t] = s.request("POST", "/predict", {"inputs": [[t]], "raw_scores": True})[2]
            before = s.metrics()
            errors = []

            def client(seed):
                r = random.Random(seed)
                for _ in range(4):
                    subset = r.sample(texts, r.randrange(1, 8))
                    st, _, body = s.request("POST", "/embed", {"inputs": subset, "normalize": False})
                    vecs = json.loads(body)
                    st2, _, body2 = s.request("POST", "/predict", {"inputs": [[t] for t in subset],
                                                                   "raw_scores": True})
                    preds = json.loads(body2)
                    for t, v, p in zip(subset, vecs, preds):
                        # Compared as the JSON text: each float is printed exactly.
                        if json.dumps(v) != json.dumps(json.loads(alone_e[t])[0]):
                            errors.append(("embed", t))
                        if json.dumps(p) != json.dumps(json.loads(alone_p[t])[0]):
                            errors.append(("predict", t))

            threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(timeout=300)
            self.assertEqual(errors, [])
            after = s.metrics()
            batches = after["linformer_batch_size_count"] - before["linformer_batch_size_count"]
            seqs = after["linformer_batch_size_sum"] - before["linformer_batch_size_sum"]
            self.assertGreater(seqs / batches, 1.5, "the concurrent requests were not batched")

    def test_long_documents_do_not_pad_short_ones(self):
        with su.Server(MODEL, "--batch-wait-ms", "100") as s:
            before = s.metrics()
            long_doc = " ".join(["good"] * 55)
            results = []
            threads = [threading.Thread(target=lambda b=b: results.append(s.post("/embed", b)[0]))
                       for b in [{"inputs": [long_doc]}] + [{"inputs": ["bad"]}] * 6]
            for th in threads:
                th.start()
            for th in threads:
                th.join(timeout=120)
            self.assertEqual(results, [200] * 7)
            after = s.metrics()
            tokens = after["linformer_batch_tokens_sum"] - before["linformer_batch_tokens_sum"]
            # Padded to the long document, the seven would cost 7 x 64 tokens.
            self.assertLess(tokens, 3 * 64)


class Limits(unittest.TestCase):
    def test_payload_limit(self):
        with su.Server(MODEL, "--payload-limit", "2000") as s:
            status, headers, data = s.request("POST", "/embed", {"inputs": ["good " * 600]})
            self.assertEqual(status, 413)
            self.assertEqual(json.loads(data)["error_type"], "payload_too_large")
            self.assertEqual(s.post("/embed", {"inputs": "good"})[0], 200)

    def test_too_many_in_flight(self):
        with su.Server(MODEL, "--max-concurrent-requests", "2", "--batch-wait-ms", "1500") as s:
            results = []
            threads = [threading.Thread(target=lambda: results.append(s.post("/embed", {"inputs": "good"})[0]))
                       for _ in range(2)]
            for th in threads:
                th.start()
            end = time.time() + 10
            while s.metrics()["linformer_requests_in_flight"] < 2 and time.time() < end:
                time.sleep(0.02)
            status, err = s.post("/embed", {"inputs": "bad"})
            self.assertEqual((status, err["error_type"]), (429, "overloaded"))
            for th in threads:
                th.join(timeout=60)
            self.assertEqual(results, [200, 200])

    def test_api_key(self):
        with su.Server(MODEL, "--api-key", "s3cret") as s:
            self.assertEqual(s.request("GET", "/health")[0], 200)  # open to load balancers
            status, err = s.post("/embed", {"inputs": "good"})
            self.assertEqual((status, err["error_type"]), (401, "unauthorized"))
            status, err = s.post("/embed", {"inputs": "good"}, headers={"Authorization": "Bearer s3cre"})
            self.assertEqual(status, 401)
            self.assertEqual(s.request("GET", "/info")[0], 401)
            status, out = s.post("/embed", {"inputs": "good"}, headers={"Authorization": "Bearer s3cret"})
            self.assertEqual(status, 200)

    def test_client_that_leaves_is_dropped_before_compute(self):
        with su.Server(MODEL, "--batch-wait-ms", "1500") as s:
            before = s.metrics()
            body = json.dumps({"inputs": ["the movie was good"]}).encode()
            c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            c.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            time.sleep(0.3)  # queued: the worker waits 1.5 s for company
            c.close()
            key = 'linformer_request_failure{route="/embed",err="client_closed"}'
            end = time.time() + 20
            while s.metrics().get(key, 0) < 1 and time.time() < end:
                time.sleep(0.05)
            after = s.metrics()
            self.assertEqual(after.get(key, 0), 1)
            self.assertEqual(after["linformer_batch_size_sum"], before["linformer_batch_size_sum"],
                             "the request of the client that left was computed")
            self.assertEqual(s.post("/embed", {"inputs": "good"})[0], 200)

    def test_sigterm_finishes_requests_in_flight(self):
        with su.Server(MODEL, "--batch-wait-ms", "1000") as s:
            results = []
            threads = [threading.Thread(target=lambda t=t: results.append(s.post("/embed", {"inputs": t})))
                       for t in TEXTS[:3]]
            for th in threads:
                th.start()
            end = time.time() + 10
            while s.metrics()["linformer_requests_in_flight"] < 3 and time.time() < end:
                time.sleep(0.02)
            self.assertEqual(s.stop(signal.SIGTERM), 0)
            for th in threads:
                th.join(timeout=60)
            self.assertEqual(sorted(r[0] for r in results), [200, 200, 200])
            self.assertTrue(all(len(r[1][0]) == 32 for r in results))
            self.assertTrue(su.port_closed(s.port))
            self.assertIn("SIGTERM", s.stderr())


class Startup(unittest.TestCase):
    def test_unhealthy_until_warmed_up(self):
        # Standard attention at max_len 4096: the warm-up forward takes a while.
        d = os.path.join(ROOT, "big")
        su.run(["init", "--config", os.path.join(os.path.dirname(__file__), "..", "..", "configs",
                                                 "small-standard.json"),
                "--set", "max_len=4096", "--set", "n_layers=2", "--set", "d_model=64",
                "--set", "n_heads=2", "--set", "d_ff=128", "--set", "vocab_size=64", "--out", d])
        shutil.copy(os.path.join(MODEL, "tokenizer.model"), d)
        with su.Server(d, wait=False) as s:
            s.wait_ready()
            self.assertEqual(s.first_health, 503)
            self.assertEqual(s.post("/embed", {"inputs": "good"})[0], 200)

    def test_bad_model_folder_exits_with_error(self):
        d = os.path.join(ROOT, "empty")
        os.makedirs(d, exist_ok=True)
        with su.Server(d, wait=False) as s:
            self.assertEqual(s.proc.wait(timeout=60), 1)
            self.assertIn("tokenizer.model", s.stderr())


if __name__ == "__main__":
    if not su.BIN:
        sys.exit("set LINFORMER_BIN to the linformer program")
    unittest.main()
