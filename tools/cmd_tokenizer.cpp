#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "linformer/file_util.h"
#include "linformer/tokenizer.h"

namespace lf::cli {

void add_tokenizer(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenizer", "Train or apply a SentencePiece tokenizer.");
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
                  "Lines sampled for training (evenly spaced)")
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
    auto* e = cmd->add_subcommand("encode", "Print token ids of each line of stdin.");
    auto path = std::make_shared<std::string>();
    e->add_option("--tokenizer", *path, "Tokenizer file")->required()->check(CLI::ExistingFile);
    e->callback([path] {
      Tokenizer tok(*path);
      std::string line;
      while (std::getline(std::cin, line)) {
        const auto ids = tok.encode(line);
        for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
        std::printf("\n");
      }
    });
  }
}

}  // namespace lf::cli
