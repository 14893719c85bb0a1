// Text-classification data, reading: the TSV and aclImdb readers, TextInput (streams), and the
// label maps. Encoding examples into token sequences and batches is in classify_encode.cpp.
#include "linformer/classify_data.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "data/corpus.h"
#include "linformer/error.h"

namespace lf {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t t = line.find('\t', start);
    if (t == std::string::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, t - start));
    start = t + 1;
  }
}

// `<br />` (IMDB markup) and stray control whitespace become single spaces; ends trimmed.
std::string clean_text(std::string s) {
  static const char* tags[] = {"<br />", "<br/>", "<br>"};
  for (const char* tag : tags) {
    const size_t n = std::char_traits<char>::length(tag);
    for (size_t p = s.find(tag); p != std::string::npos; p = s.find(tag, p + 1)) s.replace(p, n, " ");
  }
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return trim(s);
}

// The fixed classes of the known formats: names, then the spellings files use.
struct KnownLabels {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> aliases;
};

const KnownLabels* known_labels(const std::string& format) {
  static const KnownLabels sentiment{{"negative", "positive"}, {{"0", "neg"}, {"1", "pos"}}};
  static const KnownLabels qnli{{"entailment", "not_entailment"}, {{"0"}, {"1"}}};
  static const KnownLabels qqp{{"not_duplicate", "duplicate"}, {{"0"}, {"1"}}};
  if (format == "sst2" || format == "aclimdb") return &sentiment;
  if (format == "qnli") return &qnli;
  if (format == "qqp") return &qqp;
  return nullptr;
}

std::string column_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

// Keeps an evenly spread subset of max examples.
void subsample(std::vector<ClassifyExample>& ex, int64_t max) {
  const int64_t n = static_cast<int64_t>(ex.size());
  if (max <= 0 || max >= n) return;
  std::vector<ClassifyExample> kept;
  kept.reserve(max);
  for (int64_t i = 0; i < max; ++i) kept.push_back(std::move(ex[i * n / max]));
  ex = std::move(kept);
}

// Records a bad row: throws (stop) or counts it (skip).
struct BadRowSink {
  ClassifyData& data;
  const ReadOptions& opt;
  void operator()(const std::string& where, const std::string& why) {
    const std::string msg = where + ": " + why;
    if (opt.bad_rows == BadRows::stop)
      fail(msg, " (use --bad-rows skip to leave bad rows out)");
    ++data.bad_rows;
    if (data.bad_messages.size() < opt.max_messages) data.bad_messages.push_back(msg);
  }
};

void read_tsv(const std::string& path, const ReadOptions& opt, ClassifyData& d) {
  std::ifstream in(path, std::ios::binary);
  LF_CHECK(in, "cannot open ", path);
  std::string line;
  int64_t lineno = 0;
  TsvSchema s;
  bool have_header = false;
  while (!have_header && std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.size() >= 3 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);  // BOM
    LF_CHECK(detect_tsv_schema(line, &s), path, ":", lineno,
             ": cannot tell the data format from the header (", column_list(split_tabs(line)),
             "); expected a tab-separated header naming a text column (sentence, text, content, "
             "review; question/sentence for QNLI; question1/question2 for QQP; "
             "text_a/text_b or sentence1/sentence2 for pairs) and optionally a label column");
    have_header = true;
  }
  LF_CHECK(have_header, path, ": the file is empty (a header line is expected)");
  d.format = s.format;
  d.pairs = s.text_b >= 0;
  d.labelled = s.label >= 0;
  d.files.push_back(path);
  const int32_t fidx = static_cast<int32_t>(d.files.size() - 1);
  BadRowSink bad{d, opt};
  const KnownLabels* known = known_labels(s.format);
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    ClassifyExample ex;
    std::string why = parse_tsv_row(s, line, &ex);
    if (why.empty() && known && d.labelled) {
      // Canonical label name of a known format.
      int found = -1;
      for (size_t c = 0; c < known->names.size() && found < 0; ++c) {
        if (ex.label == known->names[c]) found = static_cast<int>(c);
        for (const std::string& a : known->aliases[c])
          if (ex.label == a) found = static_cast<int>(c);
      }
      if (found < 0) {
        std::string allowed;
        for (size_t c = 0; c < known->names.size(); ++c)
          allowed += (c ? ", " : "") + known->aliases[c][0] + "/" + known->names[c];
        why = "unknown label '" + ex.label + "' (" + s.format + " labels are " + allowed + ")";
      } else {
        ex.label = known->names[found];
      }
    }
    if (!why.empty()) {
      bad(where, why);
      continue;
    }
    ex.file = fidx;
    ex.line = lineno;
    d.examples.push_back(std::move(ex));
  }
  LF_CHECK(!in.bad(), "error reading ", path);
}

// Reads every *.txt of a folder as one example with the given label ("" = unlabelled).
void read_review_folder(const fs::path& dir, const std::string& label, const ReadOptions& opt,
                        ClassifyData& d) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!n.empty() && n[0] != '.' && e.is_regular_file() && e.path().extension() == ".txt")
      files.push_back(e.path());
  }
  LF_CHECK(!ec, "cannot read folder ", dir.string(), ": ", ec.message());
  // Numeric order of the leading id ("123_8.txt"), then by name.
  auto key = [](const fs::path& p) {
    const std::string n = p.filename().string();
    size_t i = 0;
    long long v = 0;
    while (i < n.size() && std::isdigit(static_cast<unsigned char>(n[i]))) v = v * 10 + (n[i++] - '0');
    return std::make_pair(i > 0 ? v : -1LL, n);
  };
  std::sort(files.begin(), files.end(),
            [&](const fs::path& x, const fs::path& y) { return key(x) < key(y); });
  BadRowSink bad{d, opt};
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    LF_CHECK(in, "cannot open ", f.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const int64_t badpos = find_invalid_utf8(text);
    if (badpos >= 0) {
      bad(f.string(), "invalid UTF-8 at byte " + std::to_string(badpos + 1));
      continue;
    }
    text = clean_text(text);
    if (text.empty()) {
      bad(f.string(), "empty review");
      continue;
    }
    d.files.push_back(f.string());
    ClassifyExample ex;
    ex.a = std::move(text);
    ex.label = label;
    ex.id = f.stem().string();
    ex.file = static_cast<int32_t>(d.files.size() - 1);
    ex.line = 0;
    d.examples.push_back(std::move(ex));
  }
}

void read_aclimdb(const std::string& path, const ReadOptions& opt, ClassifyData& d) {
  fs::path dir(path);
  if (!fs::is_directory(dir / "pos") && !fs::is_directory(dir / "neg")) {
    LF_CHECK(fs::is_directory(dir / opt.split), path,
             " is not an aclImdb folder: expected pos/ and neg/ sub-folders (a split such as "
             "aclImdb/train) or a root holding ",
             opt.split, "/");
    dir /= opt.split;
    LF_CHECK(fs::is_directory(dir / "pos") || fs::is_directory(dir / "neg"), dir.string(),
             " holds neither pos/ nor neg/ (aclImdb layout: SPLIT/pos/*.txt, SPLIT/neg/*.txt)");
  }
  d.format = "aclimdb";
  d.pairs = false;
  d.labelled = true;
  for (const char* sub : {"neg", "pos"})
    if (fs::is_directory(dir / sub))
      read_review_folder(dir / sub, std::string(sub) == "neg" ? "negative" : "positive", opt, d);
}

}  // namespace

std::string ClassifyData::where(const ClassifyExample& e) const {
  const std::string f = e.file >= 0 && e.file < static_cast<int32_t>(files.size()) ? files[e.file] : "?";
  return e.line > 0 ? f + ":" + std::to_string(e.line) : f;
}

bool detect_tsv_schema(const std::string& header_in, TsvSchema* out) {
  std::string header = header_in;
  if (!header.empty() && header.back() == '\r') header.pop_back();
  TsvSchema s;
  for (const std::string& c : split_tabs(header)) s.names.push_back(lower_ascii(trim(c)));
  s.columns = s.names.size();
  auto col = [&](const std::vector<const char*>& names) {
    for (const char* n : names)
      for (size_t i = 0; i < s.names.size(); ++i)
        if (s.names[i] == n) return static_cast<int>(i);
    return -1;
  };
  // The layouts, the first whose text column(s) the header has wins: the format, the names
  // of text a, of text b (none: single texts), of the label and of the id column (of each,
  // the first name present is taken).
  struct Layout {
    const char* format;
    std::vector<const char*> a, b, label, id;
  };
  static const Layout layouts[] = {
      {"qqp", {"question1"}, {"question2"}, {"is_duplicate", "label"}, {"id", "index"}},
      {"qnli", {"question"}, {"sentence"}, {"label"}, {"index", "id"}},
      {"tsv", {"text_a"}, {"text_b"}, {"label"}, {"id", "index"}},
      {"tsv", {"sentence1"}, {"sentence2"}, {"label"}, {"id", "index"}},
      {"sst2", {"sentence"}, {}, {"label"}, {"index", "id"}},
      {"tsv", {"text", "content", "review"}, {}, {"label"}, {"id", "index"}},
  };
  for (const Layout& l : layouts) {
    if (col(l.a) < 0 || (!l.b.empty() && col(l.b) < 0)) continue;
    s.format = l.format;
    s.text_a = col(l.a);
    s.text_b = col(l.b);
    s.label = col(l.label);
    s.id = col(l.id);
    *out = std::move(s);
    return true;
  }
  return false;
}

std::string parse_tsv_row(const TsvSchema& s, const std::string& line, ClassifyExample* ex) {
  const int64_t badpos = find_invalid_utf8(line);
  if (badpos >= 0) return "invalid UTF-8 at byte " + std::to_string(badpos + 1) + " of the line";
  std::vector<std::string> f = split_tabs(line);
  if (f.size() != s.columns)
    return "expected " + std::to_string(s.columns) + " tab-separated columns (" +
           column_list(s.names) + "), found " + std::to_string(f.size());
  ex->a = clean_text(f[s.text_a]);
  if (ex->a.empty()) return "empty text in column '" + s.names[s.text_a] + "'";
  if (s.text_b >= 0) {
    ex->b = clean_text(f[s.text_b]);
    if (ex->b.empty()) return "empty text in column '" + s.names[s.text_b] + "'";
  }
  if (s.label >= 0) {
    ex->label = trim(f[s.label]);
    if (ex->label.empty()) return "empty label in column '" + s.names[s.label] + "'";
  }
  if (s.id >= 0) ex->id = trim(f[s.id]);
  return "";
}

ClassifyData read_classify_data(const std::string& path, const ReadOptions& opt) {
  std::error_code ec;
  LF_CHECK(fs::exists(path, ec), "data path ", path, " does not exist");
  ClassifyData d;
  if (fs::is_directory(path))
    read_aclimdb(path, opt, d);
  else
    read_tsv(path, opt, d);
  LF_CHECK(!opt.require_labels || d.labelled, path,
           ": no label column; a labelled file is needed here (header: ",
           d.format == "aclimdb" ? "" : "add a 'label' column", ")");
  subsample(d.examples, opt.max_examples);
  LF_CHECK(!d.examples.empty(), path, ": no usable examples",
           d.bad_rows ? " (every row was bad)" : "");
  return d;
}

// ---- labels ----

int32_t LabelMap::find(const std::string& label) const {
  for (size_t c = 0; c < names.size(); ++c) {
    if (names[c] == label) return static_cast<int32_t>(c);
    if (c < aliases.size())
      for (const std::string& a : aliases[c])
        if (a == label) return static_cast<int32_t>(c);
  }
  return -1;
}

json LabelMap::to_json() const {
  return json{{"names", names}, {"aliases", aliases}, {"positive", positive}};
}

LabelMap LabelMap::from_json(const json& j) {
  LabelMap m;
  m.names = j.at("names").get<std::vector<std::string>>();
  if (j.contains("aliases")) m.aliases = j.at("aliases").get<std::vector<std::vector<std::string>>>();
  m.aliases.resize(m.names.size());
  m.positive = j.value("positive", m.names.size() == 2 ? 1 : -1);
  LF_CHECK(m.names.size() >= 2, "labels: at least two classes are needed, found ", m.names.size());
  return m;
}

LabelMap build_label_map(const ClassifyData& data) {
  LabelMap m;
  if (const KnownLabels* k = known_labels(data.format)) {
    m.names = k->names;
    m.aliases = k->aliases;
  } else {
    std::set<std::string> distinct;
    for (const ClassifyExample& e : data.examples) distinct.insert(e.label);
    std::vector<std::string> v(distinct.begin(), distinct.end());
    auto is_int = [](const std::string& s) {
      if (s.empty() || s.size() > 9) return false;
      for (size_t i = 0; i < s.size(); ++i)
        if (!std::isdigit(static_cast<unsigned char>(s[i])) && !(i == 0 && s[i] == '-' && s.size() > 1))
          return false;
      return true;
    };
    if (std::all_of(v.begin(), v.end(), is_int))
      std::sort(v.begin(), v.end(),
                [](const std::string& x, const std::string& y) { return std::stol(x) < std::stol(y); });
    m.names = v;
    m.aliases.assign(v.size(), {});
  }
  LF_CHECK(m.names.size() >= 2, "the training data has ", m.names.size(),
           " distinct label(s); classification needs at least two");
  m.positive = m.names.size() == 2 ? 1 : -1;
  return m;
}

std::vector<int32_t> assign_labels(ClassifyData& data, const LabelMap& map, BadRows policy,
                                   size_t max_messages) {
  LF_CHECK(data.labelled, "the data has no labels");
  std::vector<int32_t> ids;
  std::vector<ClassifyExample> kept;
  kept.reserve(data.examples.size());
  std::string allowed;
  for (size_t c = 0; c < map.names.size(); ++c) allowed += (c ? ", " : "") + map.names[c];
  for (ClassifyExample& e : data.examples) {
    const int32_t c = map.find(e.label);
    if (c < 0) {
      const std::string msg =
          data.where(e) + ": unknown label '" + e.label + "' (the model's labels are " + allowed + ")";
      if (policy == BadRows::stop) fail(msg, " (use --bad-rows skip to leave bad rows out)");
      ++data.bad_rows;
      if (data.bad_messages.size() < max_messages) data.bad_messages.push_back(msg);
      continue;
    }
    ids.push_back(c);
    kept.push_back(std::move(e));
  }
  data.examples = std::move(kept);
  LF_CHECK(!data.examples.empty(), "no example has a known label");
  return ids;
}

// ---- texts from a stream ----

TextInput::TextInput(std::istream& in, std::string name, const std::string& format, bool pairs,
                     BadRows policy)
    : in_(in), name_(std::move(name)), format_(format), pairs_(pairs), policy_(policy) {
  LF_CHECK(format == "auto" || format == "tsv" || format == "lines",
           "input format must be auto, tsv or lines, got '", format, "'");
}

void TextInput::bad(const std::string& why) {
  const std::string msg = name_ + ":" + std::to_string(lineno_) + ": " + why;
  if (policy_ == BadRows::stop) fail(msg, " (use --bad-rows skip to leave bad rows out)");
  ++bad_rows_;
  if (bad_messages_.size() < 10) bad_messages_.push_back(msg);
}

bool TextInput::next(size_t max, ClassifyData* out) {
  out->examples.clear();
  out->files.assign(1, name_);
  out->pairs = pairs_;
  std::string line;
  auto read_line = [&](std::string* l) {
    if (!std::getline(in_, *l)) return false;
    ++lineno_;
    if (!l->empty() && l->back() == '\r') l->pop_back();
    return true;
  };
  if (!started_) {
    started_ = true;
    // The first non-empty line decides between a TSV header and plain lines.
    while (read_line(&line)) {
      if (line.size() >= 3 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
      if (line.empty()) continue;
      if (format_ != "lines" && detect_tsv_schema(line, &schema_)) {
        tsv_ = true;
        LF_CHECK((schema_.text_b >= 0) == pairs_, name_, ": the header (", line, ") describes ",
                 schema_.text_b >= 0 ? "sentence pairs" : "single texts", " but the model was "
                 "trained on ", pairs_ ? "sentence pairs" : "single texts");
      } else {
        LF_CHECK(format_ != "tsv", name_, ":", lineno_,
                 ": --format tsv, but the first line is not a recognised header (", line, ")");
        pending_ = line;
        has_pending_ = true;
      }
      break;
    }
  }
  out->format = tsv_ ? schema_.format : "lines";
  out->labelled = tsv_ && schema_.label >= 0;
  while (out->examples.size() < max) {
    if (has_pending_) {
      line = std::move(pending_);
      has_pending_ = false;
    } else if (!read_line(&line)) {
      break;
    }
    if (line.empty()) continue;
    ClassifyExample ex;
    ex.line = lineno_;
    if (tsv_) {
      const std::string why = parse_tsv_row(schema_, line, &ex);
      if (!why.empty()) {
        bad(why);
        continue;
      }
    } else {
      const int64_t badpos = find_invalid_utf8(line);
      if (badpos >= 0) {
        bad("invalid UTF-8 at byte " + std::to_string(badpos + 1) + " of the line");
        continue;
      }
      if (pairs_) {
        const size_t tab = line.find('\t');
        if (tab == std::string::npos) {
          bad("expected two texts separated by a tab (the model classifies sentence pairs)");
          continue;
        }
        ex.a = clean_text(line.substr(0, tab));
        ex.b = clean_text(line.substr(tab + 1));
      } else {
        ex.a = clean_text(line);
      }
      if (ex.a.empty() || (pairs_ && ex.b.empty())) {
        bad("empty text");
        continue;
      }
    }
    out->examples.push_back(std::move(ex));
  }
  return !out->examples.empty();
}

}  // namespace lf
