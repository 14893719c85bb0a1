#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "linformer/file_util.h"
#include "linformer/error.h"
#include "linformer/tokenizer.h"

namespace lf::cli {

void add_tokenizer(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenizer", "Train a SentencePiece tokenizer, or apply any tokenizer (SentencePiece, byte-level BPE, WordPiece).");
  cmd->require_subcommand(1);
  {
    auto* t = cmd->add_subcommand(
        "train",
        "Train a tokenizer on text files or folders (one document per line, UTF-8).\n"
        "Special ids: 0 <s>, 1 <pad>, 2 </s>, 3 <unk>, 4 <mask>.");
    struct Opts {
      std::vector<std::string> input;
      std::string out;
      TokenizerTrainOptions o;
    };
    auto o = std::make_shared<Opts>();
    t->add_option("--input", o->input, "Corpus files or folders")->required();
    t->add_option("--out", o->out, "Output tokenizer file (e.g. tokenizer.model)")->required();
    t->add_option("--vocab-size", o->o.vocab_size, "Vocabulary size (pieces incl. specials)")
        ->capture_default_str();
    t->add_option("--type", o->o.model_type, "unigram or bpe")
        ->check(CLI::IsMember({"unigram", "bpe"}))
        ->capture_default_str();
    t->add_option("--max-sentences", o->o.max_sentences,
                  "Pieces of text sampled for training, evenly spaced: lines, with lines over "
                  "2 KB (a whole book on one line) cut into pieces of at most 2 KB at spaces")
        ->capture_default_str();
    t->add_option("--seed", o->o.seed, "Random seed")->capture_default_str();
    t->callback([o] {
      for (const std::string& in : o->input)
        check_not_an_input(o->out, "tokenizer train: --out", {{"--input", in}});
      Tokenizer::train(o->input, o->out, o->o);
      Tokenizer tok(o->out);
      std::printf("tokenizer with %lld pieces written to %s\n",
                  static_cast<long long>(tok.vocab_size()), o->out.c_str());
    });
  }
  {
    auto* e = cmd->add_subcommand(
        "encode",
        "Print the token ids of each line of stdin (space-separated, or JSON with --json).");
    e->footer(
        "TOKENIZER is a tokenizer file (tokenizer.json, vocab.txt, a SentencePiece model) or a\n"
        "folder holding tokenizer.json, vocab.json + merges.txt, vocab.txt or tokenizer.model\n"
        "(a model folder, a Hugging Face folder). Example:\n"
        "  echo 'Hello world' | linformer tokenizer encode --tokenizer hf/roberta-base --json");
    struct Opts {
      std::string path;
      bool json = false, special = false;
    };
    auto o = std::make_shared<Opts>();
    e->add_option("--tokenizer", o->path, "Tokenizer file or folder")->required()
        ->check(CLI::ExistingPath);
    e->add_flag("--json", o->json,
                "One JSON object per line: {\"ids\": [...], \"tokens\": [...]}");
    e->add_flag("--special", o->special, "Frame each line with the tokenizer's cls and sep tokens");
    e->callback([o] {
      Tokenizer tok(o->path);
      std::string line;
      int64_t lineno = 0;
      while (std::getline(std::cin, line)) {
        ++lineno;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::vector<int32_t> ids;
        try {
          ids = tok.encode(line);
        } catch (const Error& err) {
          fail("stdin:", lineno, ": ", err.what());
        }
        if (o->special) {
          LF_CHECK(tok.special().cls >= 0 && tok.special().sep >= 0, "--special: the tokenizer ",
                   o->path, " has no cls/sep tokens");
          ids.insert(ids.begin(), tok.special().cls);
          ids.push_back(tok.special().sep);
        }
        if (o->json) {
          nlohmann::json j;
          j["ids"] = ids;
          nlohmann::json toks = nlohmann::json::array();
          for (int32_t id : ids) toks.push_back(tok.piece(id));
          j["tokens"] = std::move(toks);
          std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        } else {
          for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
          std::printf("\n");
        }
      }
    });
  }
  {
    auto* d = cmd->add_subcommand(
        "decode", "Print the text of each line of ids on stdin (space-separated or a JSON array).");
    auto path = std::make_shared<std::string>();
    d->add_option("--tokenizer", *path, "Tokenizer file or folder")->required()
        ->check(CLI::ExistingPath);
    d->callback([path] {
      Tokenizer tok(*path);
      std::string line;
      int64_t lineno = 0;
      while (std::getline(std::cin, line)) {
        ++lineno;
        std::vector<int32_t> ids;
        const size_t first = line.find_first_not_of(" \t\r");
        if (first != std::string::npos && (line[first] == '[' || line[first] == '{')) {
          nlohmann::json j;
          try {  // at most {"ids": [...]}: nothing nests deeper than 2
            j = nlohmann::json::parse(line, [&](int depth, nlohmann::json::parse_event_t,
                                                nlohmann::json&) {
              LF_CHECK(depth <= 2, "stdin:", lineno, ": JSON nested too deeply");
              return true;
            });
          } catch (const nlohmann::json::exception& e) {
            fail("stdin:", lineno, ": not valid JSON: ", e.what());
          }
          if (j.is_object() && j.contains("ids")) j = j["ids"];
          LF_CHECK(j.is_array(), "stdin:", lineno, ": expected an array of ids");
          for (const auto& v : j) {
            LF_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 &&
                         v.get<int64_t>() < tok.vocab_size(),
                     "stdin:", lineno, ": an element is not an id in [0, ", tok.vocab_size(), ")");
            ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
          }
        } else {
          std::istringstream in(line);
          std::string w;
          while (in >> w) {
            char* end = nullptr;
            const long long v = std::strtoll(w.c_str(), &end, 10);
            LF_CHECK(*end == 0 && v >= 0 && v < tok.vocab_size(), "stdin:", lineno, ": '", w,
                     "' is not an id in [0, ", tok.vocab_size(), ")");
            ids.push_back(static_cast<int32_t>(v));
          }
        }
        std::printf("%s\n", tok.decode(ids).c_str());
      }
    });
  }
  {
    auto* b = cmd->add_subcommand(
        "bench", "Time encoding the lines of a file on one thread: MB/s of text and tokens/s per CPU second.");
    struct Opts {
      std::string path, input;
      double seconds = 2;
    };
    auto o = std::make_shared<Opts>();
    b->add_option("--tokenizer", o->path, "Tokenizer file or folder")->required()
        ->check(CLI::ExistingPath);
    b->add_option("--input", o->input, "Text file (one document per line)")->required()
        ->check(CLI::ExistingFile);
    b->add_option("--seconds", o->seconds, "Repeat passes over the text for at least this much CPU time")
        ->capture_default_str();
    b->callback([o] {
      const Tokenizer tok(o->path);
      std::vector<std::string> lines;
      {
        std::ifstream in(o->input);
        std::string line;
        while (std::getline(in, line)) lines.push_back(line);
      }
      size_t bytes = 0;
      for (const auto& l : lines) bytes += l.size();
      LF_CHECK(bytes > 0, "tokenizer bench: ", o->input, " is empty");
      for (const auto& l : lines) (void)tok.encode(l);  // warm-up (caches, pages)
      // CPU time of this process (one thread encodes), so that other work on the machine
      // does not count; wall time beside it.
      auto cpu = [] {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
      };
      int64_t passes = 0, tokens = 0;
      const double c0 = cpu();
      const auto t0 = std::chrono::steady_clock::now();
      double dt = 0;
      do {
        for (const auto& l : lines) tokens += static_cast<int64_t>(tok.encode(l).size());
        ++passes;
        dt = cpu() - c0;
      } while (dt < o->seconds);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%s (%s): %zu lines, %.2f MB, %lld passes in %.2f s CPU (%.2f s wall): "
                  "%.2f MB/s, %.0f tokens/s of CPU time\n",
                  o->path.c_str(), tok.kind(), lines.size(), bytes / 1e6,
                  static_cast<long long>(passes), dt, wall, passes * bytes / 1e6 / dt,
                  tokens / dt);
    });
  }
}

}  // namespace lf::cli
