"""Helpers of the `linformer serve` tests: tiny model folders made with the program itself, a
server process on a free loopback port, and an HTTP client (the standard library's
http.client). Every wait is bounded."""
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("LINFORMER_BIN", "")

FILLER = "the movie was very and plot it acting film really".split()


def tsv_rows(n, seed, pairs=False):
    r = random.Random(seed)
    out = ["label\tsentence1\tsentence2" if pairs else "label\tsentence"]
    for _ in range(n):
        y = r.randrange(2)
        words = [r.choice(FILLER) for _ in range(r.randrange(2, 8))]
        words.insert(r.randrange(len(words) + 1), "good" if y else "bad")
        if pairs:
            other = [r.choice(FILLER) for _ in range(r.randrange(1, 5))]
            out.append(f"{y}\t{' '.join(other)}\t{' '.join(words)}")
        else:
            out.append(f"{y}\t{' '.join(words)}")
    return "\n".join(out) + "\n"


def run(args, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    p = subprocess.run([BIN] + args, capture_output=True, text=True, env=env, timeout=600, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"linformer {' '.join(args)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p.stdout


def make_classifier(root, name, pairs=False, max_len=64, extra=()):
    """Finetunes a tiny classifier (a second or two) and returns its best/ folder."""
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "train.tsv"), "w") as f:
        f.write(tsv_rows(320, 1, pairs))
    with open(os.path.join(d, "dev.tsv"), "w") as f:
        f.write(tsv_rows(64, 2, pairs))
    run(["finetune", "--train", f"{d}/train.tsv", "--dev", f"{d}/dev.tsv", "--out", f"{d}/run",
         "--set", "d_model=32", "--set", "n_heads=2", "--set", "d_ff=64", "--set", "n_layers=2",
         "--set", f"max_len={max_len}", "--set", "k=8", "--set", "sharing=kv", "--set", "dropout=0",
         "--set", "attention_dropout=0", "--vocab-size", "40", "--batch-size", "16",
         "--epochs", "3", "--lr", "3e-3", "--seed", "3", "--quiet", *extra])
    return f"{d}/run/best"


class Server:
    """`linformer serve` on 127.0.0.1, any free port."""

    def __init__(self, model, *args, threads=2, wait=True):
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
        self.proc = subprocess.Popen([BIN, "serve", "--model", model, "--host", "127.0.0.1",
                                      "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env)
        line = self.proc.stdout.readline()  # printed once the port is bound
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"serve did not start: {line!r}\n{self.stderr()}")
        self.port = int(m.group(1))
        self.first_health = None
        if wait:
            self.wait_ready()

    def stderr(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def log_lines(self, keep, count=1, timeout=20):
        """The server's log lines for which keep(line) holds, once there are `count` of them:
        a request's line is written after its response is sent, so it may come a moment
        after the client has the answer. Gives up after `timeout` seconds."""
        end = time.time() + timeout
        while True:
            lines = [l for l in self.stderr().splitlines() if keep(l)]
            if len(lines) >= count or time.time() > end:
                return lines
            time.sleep(0.02)

    def wait_ready(self, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            status, _, _ = self.request("GET", "/health")
            if self.first_health is None:
                self.first_health = status
            if status == 200:
                return
            time.sleep(0.02)
        raise RuntimeError("the server did not become healthy:\n" + self.stderr())

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers dict, body bytes); body: bytes, str, or an object sent as JSON."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def post(self, path, body, **kw):
        status, headers, data = self.request("POST", path, body, **kw)
        return status, json.loads(data) if data else None

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        values = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                key, _, v = line.rpartition(" ")
                values[key] = float(v)
        return values

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.log.close()
        os.unlink(self.log.name)


def make_models(prefix):
    """A temporary folder with the test models: a classifier ("single"), one of text pairs
    ("pairs") and an encoder without labels (embeddings only: the classifier's files minus
    labels.json). Returns (root, model, pairs, encoder)."""
    root = tempfile.mkdtemp(prefix=prefix)
    model = make_classifier(root, "single")
    pairs = make_classifier(root, "pairs", pairs=True)
    encoder = os.path.join(root, "encoder")
    shutil.copytree(model, encoder)
    os.unlink(os.path.join(encoder, "labels.json"))
    return root, model, pairs, encoder


def cli_lines(root, cmd, model, texts, *args):
    """`linformer CMD --model MODEL --input FILE ARGS` on texts (one a line, FILE in root): its
    JSON lines, parsed."""
    path = os.path.join(root, "lines.txt")
    with open(path, "w") as f:
        f.write("\n".join(texts) + "\n")
    out = run([cmd, "--model", model, "--input", path, *args])
    return [json.loads(line) for line in out.splitlines()]


class ServerCase(unittest.TestCase):
    """Tests that share one server for their class, self.s, on the model folder model() returns
    (a static method: the folder is known once the module is set up)."""

    @classmethod
    def setUpClass(cls):
        cls.s = Server(cls.model())

    @classmethod
    def tearDownClass(cls):
        cls.s.close()


def port_closed(port):
    s = socket.socket()
    try:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0
    finally:
        s.close()


def write_safetensors(path, tensors):
    """tensors: name -> (dtype "I32" | "F32", shape, flat list of values)."""
    import struct
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, values) in tensors.items():
        blob = struct.pack(f"<{len(values)}{'i' if dtype == 'I32' else 'f'}", *values)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors_f32(path, name):
    """(shape, flat list of floats) of one F32 tensor."""
    import struct
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    t = header[name]
    assert t["dtype"] == "F32", t
    a, b = t["data_offsets"]
    raw = data[8 + n + a:8 + n + b]
    return t["shape"], list(struct.unpack(f"<{len(raw) // 4}f", raw))
