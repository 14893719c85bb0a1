#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "linformer/error.h"
#include "server.h"

namespace lf::cli {

void add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "serve",
      "HTTP server for embeddings and classification, compatible with Hugging Face's\n"
      "text-embeddings-inference: POST /embed, /embed_all, /predict, /rerank (a pair\n"
      "classifier), /tokenize, /decode, /v1/embeddings and /embeddings (OpenAI), / and\n"
      "/invocations (the model's own route: /predict for a classifier, /embed otherwise);\n"
      "GET /info, /health, /ping, /metrics (Prometheus), /openapi.json, and / (a page to try it).");
  cmd->footer(
      "Requests from many clients are batched: HTTP threads parse and tokenize, one worker runs\n"
      "the model on batches of similar lengths under --max-batch-tokens. A text's result is the\n"
      "same, bit for bit in f32, alone or in any batch. Errors are JSON {\"error\", "
      "\"error_type\"}\n"
      "with TEI's statuses (413, 422, 424, 429, 401, 503). SIGTERM or SIGINT: stop accepting, "
      "answer\n"
      "what is in flight, exit 0. One log line per request on stderr. docs/serving.md has more.\n"
      "Example:\n"
      "  linformer serve --model runs/sst2/best --port 8080 &\n"
      "  curl -s localhost:8080/predict -H 'Content-Type: application/json' \\\n"
      "       -d '{\"inputs\": \"a gripping, beautiful film\"}'\n"
      "  linformer serve --model runs/qnli --port 8081 &   # a finetune run folder: RUN/best\n"
      "  curl -s localhost:8081/rerank -H 'Content-Type: application/json' \\\n"
      "       -d '{\"query\": \"what does it project?\", \"texts\": [\"keys\", \"weather\"]}'");
  struct Opts {
    serve::ServeOptions s;
  };
  auto o = std::make_shared<Opts>();
  add_model_option(cmd, &o->s.model,
                   "Model folder: a classifier (from `linformer finetune`, serves /predict, "
                   "/rerank for a pair classifier, and /embed) or a pretrained model folder with "
                   "its tokenizer (/embed)")
      ->check(CLI::ExistingDirectory)
      ->group("Model");
  add_compute_option(cmd, &o->s.precision, &o->s.float_layers);
  cmd->add_option("--threads", o->s.threads,
                  "Compute threads of the inference worker (0: OMP_NUM_THREADS, else every core)")
      ->check(cli::in_range(0, 1024))
      ->capture_default_str()
      ->group("Model");
  cmd->add_option("--pooling", o->s.pooling,
                  "Default pooling of /embed and /v1/embeddings: cls (first token) or mean (over "
                  "the real tokens); default: the classifier's, else cls")
      ->check(CLI::IsMember({"cls", "mean"}))
      ->group("Model");
  cmd->add_option("--root-route", o->s.root_route,
                  "What POST / and POST /invocations answer as: auto (/predict for a classifier, "
                  "/embed otherwise, as TEI), embed, predict, or rerank (a pair classifier)")
      ->check(CLI::IsMember({"auto", "embed", "predict", "rerank"}))
      ->capture_default_str()
      ->group("Model");
  cmd->add_option("--rerank-label", o->s.rerank_label,
                  "The label of a pair classifier whose probability is /rerank's score (default: "
                  "the first label named entailment, relevant, related, duplicate, paraphrase, "
                  "equivalent, yes, true, positive or 1, else the second of two classes)")
      ->group("Model");
  cmd->add_option("--model-id", o->s.model_id,
                  "Name of the model in /info and /v1/embeddings (default: the folder's name)")
      ->group("Model");
  cmd->add_option("--host", o->s.host,
                  "Address to listen on (127.0.0.1: this machine only; 0.0.0.0 or :: for all)")
      ->capture_default_str()
      ->group("Network");
  cmd->add_option("--port", o->s.port, "Port (0: any free port; the one taken is printed)")
      ->check(cli::in_range(0, 65535))
      ->capture_default_str()
      ->group("Network");
  cmd->add_option("--api-key", o->s.api_key,
                  "Require \"Authorization: Bearer KEY\" on every route but GET /health, /ping, / "
                  "and /openapi.json (401 otherwise)")
      ->group("Network");
  cmd->add_option("--payload-limit", o->s.payload_limit,
                  "Largest request body in bytes (413 above)")
      ->check(cli::in_range(1, 1LL << 31))
      ->capture_default_str()
      ->group("Network");
  cmd->add_option("--log-format", o->s.log_format, "Request log on stderr: text or json lines")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str()
      ->group("Network");
  cmd->add_option("--max-concurrent-requests", o->s.max_concurrent_requests,
                  "Requests in flight at once; more are refused with 429")
      ->check(cli::in_range(1, 65536))
      ->capture_default_str()
      ->group("Limits");
  cmd->add_option("--max-batch-tokens", o->s.max_batch_tokens,
                  "Tokens per batch, padding included (a longer sequence runs alone)")
      ->check(cli::in_range(1, 1 << 30))
      ->capture_default_str()
      ->group("Limits");
  cmd->add_option("--max-batch-requests", o->s.max_batch_requests,
                  "Sequences per batch (0: only --max-batch-tokens limits it)")
      ->check(cli::in_range(0, 1 << 20))
      ->capture_default_str()
      ->group("Limits");
  cmd->add_option("--batch-wait-ms", o->s.batch_wait_ms,
                  "How long a request may wait for others to join its batch when the worker is "
                  "idle (0: run at once; while it computes, requests gather anyway)")
      ->check(cli::in_range(0, 600000))
      ->capture_default_str()
      ->group("Limits");
  cmd->add_flag("--no-batch-invariance{false}", o->s.batch_invariant,
                "Let a text's result vary in the last bits with the batch it runs in: faster "
                "(the linear maps run on whole batches, not in fixed tiles); default: bitwise the "
                "same in any batch (f32)")
      ->group("Limits");
  cmd->add_option("--max-client-batch-size", o->s.max_client_batch_size,
                  "Inputs per request (422 above)")
      ->check(cli::in_range(1, 1 << 20))
      ->capture_default_str()
      ->group("Limits");
  cmd->add_option("--max-input-length", o->s.max_input_length,
                  "Tokens per input, special tokens included (default and upper bound: the "
                  "model's max_len); longer ones get 422 unless truncated")
      ->check(cli::in_range(0, cli::kMaxLen))
      ->group("Limits");
  cmd->add_flag("--auto-truncate", o->s.auto_truncate,
                "Cut too-long inputs instead of refusing them when a request does not say "
                "\"truncate\"")
      ->group("Limits");
  cmd->callback([o] {
    require_compute_type(o->s.precision);  // refused before the port is bound
    // A run folder's model (RUN/best, RUN/model) is named after the run.
    const std::filesystem::path folder = std::filesystem::path(o->s.model).lexically_normal();
    if (o->s.model_id.empty() && (folder.filename() == "best" || folder.filename() == "model") &&
        std::filesystem::exists(folder.parent_path() / "train_args.json"))
      o->s.model_id = folder.parent_path().filename().string();
    if (o->s.model_id.empty()) o->s.model_id = folder.filename().string();
    if (o->s.model_id.empty() || o->s.model_id == ".")
      o->s.model_id = std::filesystem::absolute(o->s.model)
                          .lexically_normal()
                          .parent_path()
                          .filename()
                          .string();
    const int rc = serve::run_server(o->s);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace lf::cli
