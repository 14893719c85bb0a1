// The model routes' bodies of `linformer serve` (docs/serving.md): /embed, /v1/embeddings,
// /predict, /rerank, /embed_all, POST /, /decode and /tokenize, in TEI's shapes.
#include "server_impl.h"

namespace lf::serve::detail {

namespace {

// L2-normalises v in place (a zero vector stays zero).
void normalize(float* v, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(v[i]) * v[i];
  if (s <= 0) return;
  const double inv = 1.0 / std::sqrt(s);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(v[i] * inv);
}

// A classifier's scores from its logits l[C]: the softmax in double, as `linformer predict`
// computes it, or the logits themselves (raw).
std::vector<float> class_scores(const float* l, int64_t C, bool raw) {
  std::vector<float> score(l, l + C);
  if (raw) return score;
  const float mx = *std::max_element(l, l + C);
  double sum = 0;
  for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(l[c] - mx));
  for (int64_t c = 0; c < C; ++c)
    score[c] = static_cast<float>(std::exp(static_cast<double>(l[c] - mx)) / sum);
  return score;
}

}  // namespace

void Server::embed(const httplib::Request& req, httplib::Response& res, Clock::time_point t0) {
  const EmbedRequest r = parse_embed(req.body, limits_);
  Tokenized t;
  double tok_ms = 0;
  const auto job = run_inputs(req, r, Job::Kind::embed, r.pooling, t0, &t, &tok_ms);
  const int64_t D = job->width, n = static_cast<int64_t>(job->seqs.size());
  std::string body = "[";
  for (int64_t i = 0; i < n; ++i) {
    float* v = job->out.data() + i * D;
    if (r.normalize) normalize(v, D);
    if (i) body += ',';
    append_floats(&body, v, D);
  }
  body += ']';
  set_timing_headers(res, *job, t.tokens, tok_ms, t0);
  res.set_content(body, "application/json");
}

void Server::openai_embed(const httplib::Request& req, httplib::Response& res,
                          Clock::time_point t0) {
  const OpenAIEmbedRequest r = parse_openai_embed(req.body, limits_);
  const int64_t D = batcher_.bundle().model->config().d_model;
  if (r.dimensions > D)
    invalid("\"dimensions\" is " + std::to_string(r.dimensions) + " but the model's vectors have " +
            std::to_string(D));
  Tokenized t;
  double tok_ms = 0;
  const auto job = run_inputs(req, r, Job::Kind::embed, limits_.default_pooling, t0, &t, &tok_ms);
  const int64_t dims = r.dimensions > 0 ? r.dimensions : D;
  std::string data = "[";
  for (size_t i = 0; i < job->seqs.size(); ++i) {
    float* v = job->out.data() + i * D;
    normalize(v, dims);  // the first `dims` values, normalised again (as OpenAI's models)
    if (i) data += ',';
    data += "{\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":";
    if (r.base64)
      data += "\"" + base64_encode(v, dims * sizeof(float)) + "\"";
    else
      append_floats(&data, v, dims);
    data += '}';
  }
  data += ']';
  const json usage{{"prompt_tokens", t.tokens}, {"total_tokens", t.tokens}};
  const std::string model = r.model.empty() ? o_.model_id : r.model;
  set_timing_headers(res, *job, t.tokens, tok_ms, t0);
  res.set_content("{\"object\":\"list\",\"data\":" + data + ",\"model\":" +
                      json(model).dump(-1, ' ', false, json::error_handler_t::replace) +
                      ",\"usage\":" + usage.dump() + "}",
                  "application/json");
}

void Server::predict(const httplib::Request& req, httplib::Response& res, Clock::time_point t0) {
  const ClassifierBundle& cb = batcher_.bundle();
  if (!cb.has_labels())  // TEI: 424 for a route the model cannot serve
    throw ApiError(424, "backend",
                   "model is not a classifier model (its folder has no labels.json): use /embed, "
                   "or serve a folder written by `linformer finetune`");
  const PredictRequest r = parse_predict(req.body, limits_);
  Tokenized t;
  double tok_ms = 0;
  const auto job = run_inputs(req, r, Job::Kind::classify, Pooling::cls, t0, &t, &tok_ms);
  const int64_t C = job->width;
  json all = json::array();
  for (size_t i = 0; i < job->seqs.size(); ++i) {
    const std::vector<float> score = class_scores(job->out.data() + i * C, C, r.raw_scores);
    std::vector<int64_t> order(C);
    for (int64_t c = 0; c < C; ++c) order[c] = c;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return score[x] > score[y]; });
    json one = json::array();
    for (int64_t c : order) one.push_back({{"score", score[c]}, {"label", cb.labels.names[c]}});
    all.push_back(one);
  }
  set_timing_headers(res, *job, t.tokens, tok_ms, t0);
  res.set_content((r.batched ? all : all[0]).dump(), "application/json");
}

void Server::rerank(const httplib::Request& req, httplib::Response& res, Clock::time_point t0) {
  const ClassifierBundle& cb = batcher_.bundle();
  if (!limits_.model_pairs)  // TEI: 424 for a route the model cannot serve
    throw ApiError(424, "backend",
                   cb.has_labels()
                       ? "model is not a re-ranker model: this classifier takes single texts; "
                         "/rerank needs a classifier finetuned on pairs (query, passage)"
                       : "model is not a re-ranker model: it is not a classifier (no "
                         "labels.json); /rerank needs a classifier finetuned on pairs");
  if (rerank_class_ < 0)
    throw ApiError(424, "backend",
                   "model is not a re-ranker model: none of its labels means relevant; start the "
                   "server with --rerank-label NAME");
  const RerankRequest r = parse_rerank(req.body, limits_);
  Tokenized t;
  double tok_ms = 0;
  const auto job = run_inputs(req, r, Job::Kind::classify, Pooling::cls, t0, &t, &tok_ms);
  const int64_t C = job->width, n = static_cast<int64_t>(r.texts.size());
  std::vector<float> score(n);
  for (int64_t i = 0; i < n; ++i) {
    const float* l = job->out.data() + i * C;
    if (C == 1)  // one output: its sigmoid, as TEI's rerankers
      score[i] = r.raw_scores ? l[0] : static_cast<float>(1 / (1 + std::exp(-double{l[0]})));
    else
      score[i] = class_scores(l, C, r.raw_scores)[rerank_class_];
  }
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return score[x] > score[y]; });
  json all = json::array();
  for (int64_t i : order) {
    json one{{"index", i}, {"score", score[i]}};
    if (r.return_text) one["text"] = r.texts[i];
    all.push_back(one);
  }
  set_timing_headers(res, *job, t.tokens, tok_ms, t0);
  res.set_content(all.dump(), "application/json");
}

void Server::embed_all(const httplib::Request& req, httplib::Response& res, Clock::time_point t0) {
  const EmbedAllRequest r = parse_embed_all(req.body, limits_);
  Tokenized t;
  double tok_ms = 0;
  const auto job = run_inputs(req, r, Job::Kind::embed_all, Pooling::cls, t0, &t, &tok_ms);
  const int64_t D = job->width;
  std::string body = "[";
  for (size_t i = 0; i < job->token_out.size(); ++i) {
    const std::vector<float>& h = job->token_out[i];
    if (i) body += ',';
    body += '[';
    for (int64_t k = 0; k * D < static_cast<int64_t>(h.size()); ++k) {
      if (k) body += ',';
      append_floats(&body, h.data() + k * D, D);
    }
    body += ']';
  }
  body += ']';
  set_timing_headers(res, *job, t.tokens, tok_ms, t0);
  res.set_content(body, "application/json");
}

void Server::root(const httplib::Request& req, httplib::Response& res, Clock::time_point t0) {
  if (root_route_ == "predict") return predict(req, res, t0);
  if (root_route_ == "rerank") return rerank(req, res, t0);
  embed(req, res, t0);
}

void Server::decode_route(const httplib::Request& req, httplib::Response& res) {
  const Tokenizer& tok = *batcher_.bundle().tokenizer;
  const DecodeRequest r = parse_decode(req.body, limits_, tok.vocab_size());
  json all = json::array();
  for (const std::vector<int32_t>& ids : r.ids) {
    if (r.skip_special_tokens) {
      all.push_back(tok.decode(ids));
      continue;
    }
    // Special tokens kept as their text (<s>, </s>, ...), the runs between them decoded.
    std::string text;
    std::vector<int32_t> run;
    for (int32_t id : ids) {
      if (!tok.is_special(id)) {
        run.push_back(id);
        continue;
      }
      text += tok.decode(run);
      run.clear();
      text += tok.piece(id);
    }
    text += tok.decode(run);
    all.push_back(text);
  }
  res.set_header("x-compute-inputs", std::to_string(r.ids.size()));
  res.set_content(all.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void Server::tokenize_route(const httplib::Request& req, httplib::Response& res) {
  const TokenizeRequest r = parse_tokenize(req.body, limits_);
  const ClassifierBundle& cb = batcher_.bundle();
  json all = json::array();
  int64_t tokens = 0;
  for (const std::string& text : r.inputs) {
    std::vector<int32_t> ids = cb.tokenizer->encode(cb.task.lowercase ? lower_ascii(text) : text);
    json one = json::array();
    auto add = [&](int32_t id, bool special) {
      one.push_back({{"id", id},
                     {"text", cb.tokenizer->piece(id)},
                     {"special", special},
                     {"start", nullptr},
                     {"stop", nullptr}});
    };
    if (r.add_special_tokens) add(cb.tokenizer->special().cls, true);
    for (int32_t id : ids) add(id, false);
    if (r.add_special_tokens) add(cb.tokenizer->special().sep, true);
    tokens += static_cast<int64_t>(one.size());
    all.push_back(one);
  }
  res.set_header("x-compute-inputs", std::to_string(r.inputs.size()));
  res.set_header("x-compute-tokens", std::to_string(tokens));
  res.set_content(all.dump(), "application/json");
}

}  // namespace lf::serve::detail
