#include "data/mlm_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/profile.h"
#include "data/corpus.h"
#include "linformer/error.h"
#include "linformer/rng.h"
#include "linformer/tokenizer.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

// "LFTOKv02" + 8 reserved bytes, the int32 ids, then a trailer: count (u64), checksum of the
// ids (u64) and "LFTOKEND". A file cut short lacks the trailer; one changed in place fails
// the count or the checksum; either is rebuilt (TokenStream::build).
constexpr char kMagic[8] = {'L', 'F', 'T', 'O', 'K', 'v', '0', '2'};
constexpr char kEndMagic[8] = {'L', 'F', 'T', 'O', 'K', 'E', 'N', 'D'};
constexpr size_t kHeaderBytes = 16, kTrailerBytes = 24;
constexpr uint64_t kChecksumSeed = 1469598103934665603ull;

// FNV-1a over 32-bit words (ids), folded in order.
uint64_t checksum(uint64_t h, const int32_t* ids, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h = (h ^ static_cast<uint32_t>(ids[i])) * 1099511628211ull;
  return h;
}

uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

}  // namespace

TokenStream TokenStream::open(const std::string& path) {
  TokenStream s;
  s.file_ = std::make_shared<MappedFile>(path);
  s.path_ = path;
  const size_t bytes = s.file_->size();
  const unsigned char* b = s.file_->data();
  LF_CHECK(bytes >= kHeaderBytes + kTrailerBytes && std::memcmp(b, kMagic, 8) == 0 &&
               std::memcmp(b + bytes - 8, kEndMagic, 8) == 0,
           path, ": not a token cache file, or one cut short");
  const size_t body = bytes - kHeaderBytes - kTrailerBytes;
  uint64_t count = 0, sum = 0;
  std::memcpy(&count, b + bytes - kTrailerBytes, 8);
  std::memcpy(&sum, b + bytes - kTrailerBytes + 8, 8);
  LF_CHECK(body % 4 == 0 && count == body / 4, path, ": token cache holds ", body,
           " bytes of ids but its trailer says ", count, " tokens (corrupt)");
  s.data_ = reinterpret_cast<const int32_t*>(b + kHeaderBytes);
  s.size_ = static_cast<int64_t>(count);
  LF_CHECK(checksum(kChecksumSeed, s.data_, s.size_) == sum, path,
           ": token cache checksum does not match its content (corrupt)");
  return s;
}

TokenStream TokenStream::from_tokens(std::vector<int32_t> tokens) {
  TokenStream s;
  s.mem_ = std::make_shared<std::vector<int32_t>>(std::move(tokens));
  s.data_ = s.mem_->data();
  s.size_ = static_cast<int64_t>(s.mem_->size());
  return s;
}

TokenStream TokenStream::build(const std::vector<std::string>& files, const Tokenizer& tok,
                               const std::string& cache_dir, bool verbose, bool may_build) {
  uint64_t key = 1469598103934665603ull;
  for (const std::string& f : tok.files()) {
    const std::string tok_bytes = read_file(f);
    key = fnv(key, tok_bytes.data(), tok_bytes.size());
  }
  for (const std::string& f : files) {
    const std::string abs = fs::absolute(f).string();
    struct stat st {};
    LF_CHECK(::stat(f.c_str(), &st) == 0, "cannot stat corpus file ", f);
    key = fnv(key, abs.data(), abs.size());
    const int64_t sz = st.st_size, mt = st.st_mtim.tv_sec, mtn = st.st_mtim.tv_nsec;
    key = fnv(key, &sz, 8);
    key = fnv(key, &mt, 8);
    key = fnv(key, &mtn, 8);
  }
  char name[64];
  std::snprintf(name, sizeof(name), "tokens-%016llx.bin", static_cast<unsigned long long>(key));
  const std::string path = (fs::path(cache_dir) / name).string();
  if (!may_build) {
    // Another rank built it: read only, never write.
    std::string why = "it does not exist here";
    if (fs::exists(path)) {
      try {
        return open(path);
      } catch (const Error& e) {
        why = e.what();
      }
    }
    fail("token cache ", path, ", which rank 0 built, cannot be read on this rank (", why,
         "): every rank must see the same corpus files (same path, size and modification "
         "time) and the same cache folder (--cache-dir, default RUN/cache), i.e. a file "
         "system all hosts share; see docs/distributed.md");
  }
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  LF_CHECK(!ec, "cannot create cache folder ", cache_dir, ": ", ec.message());
  if (fs::exists(path)) {
    try {
      TokenStream cached = open(path);
      if (verbose) std::fprintf(stderr, "data: using cached tokens %s\n", path.c_str());
      return cached;
    } catch (const Error& e) {
      std::fprintf(stderr, "data: %s; rebuilding it\n", e.what());
    }
  }
  if (verbose) std::fprintf(stderr, "data: tokenising %zu file(s) into %s\n", files.size(),
                            path.c_str());
  int64_t count = 0, docs = 0;
  uint64_t sum = kChecksumSeed;
  write_file_atomic(path, [&](std::ostream& os) {
    os.write(kMagic, 8);
    const int64_t reserved = 0;
    os.write(reinterpret_cast<const char*>(&reserved), 8);
    for_each_line(files, [&](const std::string& line) {
      std::vector<int32_t> ids = tok.encode(line);
      ids.push_back(tok.special().sep);
      os.write(reinterpret_cast<const char*>(ids.data()), ids.size() * 4);
      sum = checksum(sum, ids.data(), static_cast<int64_t>(ids.size()));
      count += static_cast<int64_t>(ids.size());
      if (verbose && ++docs % 100000 == 0)
        std::fprintf(stderr, "data: %lld documents, %lld tokens\n", static_cast<long long>(docs),
                     static_cast<long long>(count));
      return true;
    });
    const uint64_t trailer[2] = {static_cast<uint64_t>(count), sum};
    os.write(reinterpret_cast<const char*>(trailer), sizeof trailer);
    os.write(kEndMagic, 8);
  });
  LF_CHECK(count > 0, "the corpus holds no text (", files.size(), " file(s), all empty)");
  return open(path);
}

void PackedSequences::set_frame(const SpecialIds& sp) {
  LF_CHECK(sp.cls >= 0 && sp.sep >= 0 && sp.pad >= 0,
           "masked-LM sequences need the tokenizer's cls, sep and pad tokens (<s> </s> <pad> or "
           "[CLS] [SEP] [PAD]); this tokenizer lacks one");
  cls = sp.cls, sep = sp.sep, pad = sp.pad;
}

MaskingOptions masking_for(const Tokenizer& tok, double mask_prob, int64_t vocab_size) {
  const SpecialIds& sp = tok.special();
  LF_CHECK(sp.mask >= 0, "masked-LM needs a mask token (<mask> or [MASK]); the tokenizer ",
           tok.path(), " has none");
  MaskingOptions mo;
  mo.mask_prob = mask_prob;
  mo.vocab_size = vocab_size;
  mo.mask_id = sp.mask;
  mo.special.assign(static_cast<size_t>(vocab_size), 0);
  for (int64_t id = 0; id < vocab_size; ++id) mo.special[id] = tok.is_special(static_cast<int32_t>(id));
  int32_t first = 0;
  while (first < vocab_size && mo.special[first]) ++first;
  mo.first_normal_id = first;
  return mo;
}

int64_t PackedSequences::count() const {
  const int64_t body = n - 2;
  return (end - begin + body - 1) / body;
}

void PackedSequences::get(int64_t i, int32_t* ids, float* mask) const {
  const int64_t body = n - 2;
  const int64_t s0 = begin + i * body;
  const int64_t len = std::min(body, end - s0);
  ids[0] = cls;
  std::memcpy(ids + 1, stream->data() + s0, len * sizeof(int32_t));
  ids[len + 1] = sep;
  for (int64_t t = 0; t < n; ++t) {
    if (t > len + 1) ids[t] = pad;
    mask[t] = t <= len + 1 ? 1.f : 0.f;
  }
}

void split_stream(const TokenStream& s, int64_t n, double valid_fraction, PackedSequences* train,
                  PackedSequences* valid) {
  LF_CHECK(n >= 3, "sequence length must be at least 3");
  const int64_t body = n - 2;
  const int64_t total = (s.size() + body - 1) / body;
  LF_CHECK(total >= 2, "the corpus is too small: ", s.size(), " tokens make ", total,
           " sequence(s) of ", n, "; need at least 2 (one for validation)");
  const int64_t nv =
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil(valid_fraction * total)), 1, total - 1);
  const int64_t cut = (total - nv) * body;
  *train = PackedSequences{&s, 0, cut, n};
  *valid = PackedSequences{&s, cut, s.size(), n};
}

int64_t apply_mlm_mask(int32_t* ids, int32_t* labels, const float* mask, int64_t n,
                       const MaskingOptions& opt, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> cand;
  for (int64_t t = 0; t < n; ++t) {
    labels[t] = -100;
    if (mask[t] != 0.f && ids[t] >= opt.first_normal_id &&
        !(ids[t] < static_cast<int64_t>(opt.special.size()) && opt.special[ids[t]]))
      cand.push_back(t);
  }
  if (cand.empty()) return 0;
  const int64_t m = static_cast<int64_t>(cand.size());
  const int64_t k = std::clamp<int64_t>(std::llround(opt.mask_prob * m), 1, m);
  // Partial Fisher-Yates: the first k of a random permutation of the candidates.
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng_bits(seed, stream, i) % (m - i));
    std::swap(cand[i], cand[j]);
  }
  const int64_t normal = opt.vocab_size - opt.first_normal_id;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t t = cand[i];
    labels[t] = ids[t];
    const float u = rng_uniform(seed, stream ^ 0xA5A5A5A5ull, i);
    if (u < opt.replace_mask) {
      ids[t] = opt.mask_id;
    } else if (u < opt.replace_mask + opt.replace_random) {
      const int32_t r = opt.first_normal_id +
                        static_cast<int32_t>(rng_bits(seed, stream ^ 0x5A5A5A5Aull, i) % normal);
      if (!(r < static_cast<int64_t>(opt.special.size()) && opt.special[r])) ids[t] = r;
    }
  }
  return k;
}

std::vector<int64_t> epoch_order(int64_t count, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(count);
  for (int64_t i = 0; i < count; ++i) p[i] = i;
  const uint64_t stream = rng_stream(0x0DE5, static_cast<uint64_t>(epoch));
  for (int64_t i = count - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng_bits(seed, stream, i) % (i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

namespace {
constexpr uint64_t kMaskSite = 0x4D41534B;  // "MASK"
}  // namespace

void MlmBatch::resize(int64_t B, int64_t n) {
  ids.resize(B * n);
  labels.resize(B * n);
  mask.resize(B * n);
}

void make_mlm_batch(const PackedSequences& seqs, const std::vector<int64_t>& which,
                    const std::vector<int64_t>& epochs, const MaskingOptions& mo, uint64_t seed,
                    MlmBatch* out) {
  PhaseScope ps(Phase::data);
  const int64_t B = static_cast<int64_t>(which.size()), n = seqs.n;
  out->resize(B, n);
  out->real_tokens = 0;
  for (int64_t b = 0; b < B; ++b) {
    int32_t* ids = out->ids.data() + b * n;
    float* m = out->mask.data() + b * n;
    seqs.get(which[b], ids, m);
    apply_mlm_mask(ids, out->labels.data() + b * n, m, n, mo, seed,
                   rng_stream(kMaskSite, static_cast<uint64_t>(epochs[b]), which[b]));
    for (int64_t t = 0; t < n; ++t) out->real_tokens += m[t] != 0.f;
  }
}

}  // namespace lf
