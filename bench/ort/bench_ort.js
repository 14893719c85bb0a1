#!/usr/bin/env node
// Times one ONNX model (an encoder exported by export.py: input "ids" int64 [batch, n], output
// "hidden" f32 [batch, n, d]) in ONNX Runtime's Node.js binding on the CPU, and prints JSON.
//
//   node bench/ort/bench_ort.js --model M.onnx --n 512 [--batch B] [--reps 3] [--threads 2]
//   node bench/ort/bench_ort.js --model M.onnx --n 512 --batch 2 --ids ids.bin --out out.bin
//
// Timing: the batch `linformer bench` times, max(1, floor(batch_tokens / n)) sequences unless
// --batch is given; random token ids; one warm-up run (more with --warmup), then the median
// of --reps runs of session.run. With --ids (raw little-endian int64, batch*n of them) the model
// runs once on those ids and writes its output to --out (raw f32): export.py's check.
//
// Session set-up (ONNX Runtime's best on the CPU for one stream of large batches):
// graphOptimizationLevel "all" (constant folding, Gelu/LayerNorm/MatMul+Add fusions and the
// rest of the extended and layout levels), intraOpNumThreads = --threads (default: the
// number of cores), interOpNumThreads 1, executionMode "sequential", the CPU memory arena and
// memory pattern on (defaults). --save-optimized FILE writes the graph after those
// optimisations (export.py counts its operators to see what ORT fused).
"use strict";
const fs = require("fs");
const os = require("os");
const ort = require("onnxruntime-node");

function parseArgs(argv) {
  const a = {
    model: null, n: 0, batch: 0, batchTokens: 8192, vocab: 50265, reps: 3, warmup: 1,
    threads: os.cpus().length, opt: "all", ids: null, out: null, saveOptimized: null, seed: 1,
  };
  const names = {
    "--model": "model", "--n": "n", "--batch": "batch", "--batch-tokens": "batchTokens",
    "--vocab": "vocab", "--reps": "reps", "--warmup": "warmup", "--threads": "threads",
    "--opt": "opt", "--ids": "ids", "--out": "out", "--save-optimized": "saveOptimized",
    "--seed": "seed",
  };
  for (let i = 2; i < argv.length; i++) {
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) {
      console.error("usage: bench_ort.js --model M.onnx --n N [--batch B] [--batch-tokens 8192] " +
                    "[--vocab V] [--reps R] [--warmup W] [--threads T] [--opt all|extended|basic|disabled] " +
                    "[--ids ids.bin --out out.bin] [--save-optimized FILE] [--seed S]");
      process.exit(2);
    }
    const v = argv[++i];
    a[key] = typeof a[key] === "number" ? Number(v) : v;
  }
  if (!a.model || !(a.n > 0)) {
    console.error("bench_ort.js: --model and --n are required");
    process.exit(2);
  }
  return a;
}

// A small deterministic generator (xorshift32) for the token ids: no dependency on Math.random.
function randomIds(count, vocab, seed) {
  const ids = new BigInt64Array(count);
  let s = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < count; i++) {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    ids[i] = BigInt(s % vocab);
  }
  return ids;
}

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main() {
  const a = parseArgs(process.argv);
  const options = {
    executionProviders: ["cpu"],
    graphOptimizationLevel: a.opt,
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    enableCpuMemArena: true,
    enableMemPattern: true,
  };
  if (a.saveOptimized) options.optimizedModelFilePath = a.saveOptimized;
  let t0 = performance.now();
  const session = await ort.InferenceSession.create(a.model, options);
  const loadMs = performance.now() - t0;
  const inName = session.inputNames[0], outName = session.outputNames[0];

  if (a.ids) {  // check mode: given ids, one run, raw f32 output
    const buf = fs.readFileSync(a.ids);
    const ids = new BigInt64Array(buf.buffer, buf.byteOffset, buf.byteLength / 8);
    const batch = ids.length / a.n;
    if (!Number.isInteger(batch)) throw new Error(`--ids holds ${ids.length} ids, not a multiple of n=${a.n}`);
    const res = await session.run({ [inName]: new ort.Tensor("int64", ids, [batch, a.n]) });
    const y = res[outName];
    fs.writeFileSync(a.out, Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
    console.log(JSON.stringify({ model: a.model, batch, n: a.n, dims: y.dims, load_ms: loadMs,
                                 ort_version: ort.env.versions.common }));
    return;
  }

  const batch = a.batch > 0 ? a.batch : Math.max(1, Math.floor(a.batchTokens / a.n));
  const feeds = { [inName]: new ort.Tensor("int64", randomIds(batch * a.n, a.vocab, a.seed), [batch, a.n]) };
  const run = async () => {
    const s = performance.now();
    const res = await session.run(feeds);
    const ms = performance.now() - s;
    for (const k of Object.keys(res)) res[k].dispose?.();
    return ms;
  };
  const warm = [];
  for (let i = 0; i < Math.max(1, a.warmup); i++) warm.push(await run());
  // As `linformer bench`: one timed run when the warm-up took longer than 20 s.
  const reps = warm[0] > 20000 ? 1 : a.reps;
  const times = [];
  for (let i = 0; i < reps; i++) times.push(await run());
  const med = median(times);
  console.log(JSON.stringify({
    model: a.model, n: a.n, batch, reps, warmup_ms: warm, times_ms: times, median_ms: med,
    ms_per_sequence: med / batch, load_ms: loadMs,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
    ort_version: ort.env.versions.common, node_version: process.version,
    session_options: { graphOptimizationLevel: a.opt, intraOpNumThreads: a.threads,
                       interOpNumThreads: 1, executionMode: "sequential" },
  }));
  await session.release();
}

main().catch((e) => {
  console.error("bench_ort.js:", e && e.message ? e.message : e);
  process.exit(1);
});
