// The client libraries that people point at a text-embeddings-inference server, run against
// `linformer serve` by tests/serve/test_clients.py. Prints what the library returned as JSON.
// Usage: node clients.mjs MODE BASE_URL TEXTS_JSON
//   openai-default  the OpenAI SDK with no encoding_format (it asks for base64 and decodes it)
//   openai-float    encoding_format "float"
//   openai-base64   encoding_format "base64" (the SDK hands the string over; decoded here)
//   openai-noprefix the SDK with baseURL = BASE_URL (POST /embeddings, TEI's route without /v1)
//   hf-feature      @huggingface/inference: endpoint(BASE_URL).featureExtraction (POST /)
import OpenAI from "openai";
import { InferenceClient } from "@huggingface/inference";

const [mode, base, textsJson] = process.argv.slice(2);
const texts = JSON.parse(textsJson);

function decodeBase64(s) {
  const b = Buffer.from(s, "base64");
  return Array.from(new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4));
}

async function main() {
  if (mode.startsWith("openai-")) {
    const client = new OpenAI({
      baseURL: mode === "openai-noprefix" ? base : `${base}/v1`,
      apiKey: "not-checked",
      maxRetries: 0,
      timeout: 60000,
    });
    const params = { model: "linformer", input: texts };
    if (mode === "openai-float") params.encoding_format = "float";
    if (mode === "openai-base64") params.encoding_format = "base64";
    const r = await client.embeddings.create(params);
    return {
      vectors: r.data.map((d) => (typeof d.embedding === "string" ? decodeBase64(d.embedding)
                                                                  : Array.from(d.embedding))),
      raw_types: r.data.map((d) => typeof d.embedding),
      indices: r.data.map((d) => d.index),
      model: r.model,
      usage: r.usage,
    };
  }
  if (mode === "hf-feature") {
    const hf = new InferenceClient();
    const r = await hf.endpoint(base).featureExtraction({ inputs: texts });
    return { vectors: r };
  }
  throw new Error(`unknown mode ${mode}`);
}

main().then(
  (out) => process.stdout.write(JSON.stringify(out) + "\n"),
  (e) => {
    process.stderr.write(`${mode}: ${e.stack || e}\n`);
    process.exit(1);
  },
);
