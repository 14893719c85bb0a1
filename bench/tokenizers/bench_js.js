// Tokenizer throughput of the reference implementations on the same text as
// `linformer tokenizer bench`: gpt-3-encoder's JavaScript encoder (GPT-2) and Hugging Face's
// tokenizers (Rust, through @anush008/tokenizers; one thread: run with RAYON_NUM_THREADS=1).
// Usage: node bench_js.js NODE_MODULES TEXT_FILE TOKENIZER_JSON... (run.sh does it all)
const fs = require('fs');
const path = require('path');
const [mods, file, ...jsons] = process.argv.slice(2);
const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length);
const bytes = lines.reduce((s, l) => s + Buffer.byteLength(l), 0);
// CPU time of the whole process (user + system), as `linformer tokenizer bench` counts it.
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
const report = (name, passes, tokens, dt) => console.log(
  `${name}: ${lines.length} lines, ${(bytes / 1e6).toFixed(2)} MB, ${passes} passes in ` +
  `${dt.toFixed(2)} s CPU: ${(passes * bytes / 1e6 / dt).toFixed(2)} MB/s, ` +
  `${(tokens / dt).toFixed(0)} tokens/s of CPU time`);

(async () => {
  const gpt3 = require(path.join(mods, 'gpt-3-encoder'));
  for (const l of lines) gpt3.encode(l);  // warm-up (and its cache, as in real use)
  let t0 = cpu(), passes = 0, tokens = 0, dt = 0;
  do {
    for (const l of lines) tokens += gpt3.encode(l).length;
    ++passes;
    dt = cpu() - t0;
  } while (dt < 2);
  report('gpt-3-encoder (JavaScript, GPT-2)', passes, tokens, dt);

  const hf = require(path.join(mods, '@anush008/tokenizers'));
  for (const j of jsons) {
    const tok = hf.Tokenizer.fromFile(j);
    const batch = 1000;
    const run = async () => {
      let n = 0;
      for (let i = 0; i < lines.length; i += batch) {
        const enc = await tok.encodeBatch(lines.slice(i, i + batch), { addSpecialTokens: false });
        for (const e of enc) n += e.getLength();
      }
      return n;
    };
    await run();
    t0 = cpu(); passes = 0; tokens = 0; dt = 0;
    do {
      tokens += await run();
      ++passes;
      dt = cpu() - t0;
    } while (dt < 2);
    report(`Hugging Face tokenizers (Rust via Node, ${path.basename(path.dirname(j))}/${path.basename(j)})`,
           passes, tokens, dt);
  }
})().catch((e) => { console.error(e); process.exit(1); });
