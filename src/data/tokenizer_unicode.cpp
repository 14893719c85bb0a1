// Unicode helpers of the tokenizers, on ICU (Debian's libicu-dev): character properties,
// canonical decomposition (NFD) and per-character full lower-casing.
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include "data/tokenizer_impl.h"
#include "linformer/error.h"

namespace lf {

std::vector<char32_t> utf8_decode(const std::string& s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = b[i];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    if (i + len > n) len = n - i;  // the caller checked the UTF-8; stay inside the string
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (b[i + k] & 0x3f);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void utf8_append(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

bool is_unicode_whitespace(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool is_unicode_punctuation(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0;
}

bool is_unicode_other(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_C_MASK) != 0;
}

bool is_unicode_nonspacing_mark(char32_t c) {
  return u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK;
}

namespace {

icu::UnicodeString to_icu(const std::u32string& s) {
  return icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(s.data()),
                                       static_cast<int32_t>(s.size()));
}

std::u32string from_icu(const icu::UnicodeString& u) {
  std::u32string out;
  out.reserve(static_cast<size_t>(u.length()));
  for (int32_t i = 0; i < u.length();) {
    const UChar32 c = u.char32At(i);
    out.push_back(static_cast<char32_t>(c));
    i += U16_LENGTH(c);
  }
  return out;
}

}  // namespace

std::u32string nfd(const std::u32string& s) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFDInstance(err);
  LF_CHECK(U_SUCCESS(err), "ICU: no NFD normaliser: ", u_errorName(err));
  const icu::UnicodeString out = n->normalize(to_icu(s), err);
  LF_CHECK(U_SUCCESS(err), "ICU: NFD failed: ", u_errorName(err));
  return from_icu(out);
}

void append_lowercase(char32_t c, std::u32string* out) {
  if (c < 0x80) {
    out->push_back(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    return;
  }
  // One character on its own: the full mapping (e.g. U+0130 -> "i" + U+0307) without the
  // context rules (final sigma), as Rust's char::to_lowercase.
  UChar src[2], dst[8];
  int32_t n = 0;
  U16_APPEND_UNSAFE(src, n, static_cast<UChar32>(c));
  UErrorCode err = U_ZERO_ERROR;
  const int32_t m = u_strToLower(dst, 8, src, n, "", &err);
  if (U_FAILURE(err) || m > 8) {
    out->push_back(c);
    return;
  }
  for (int32_t i = 0; i < m;) {
    UChar32 x;
    U16_NEXT(dst, i, m, x);
    out->push_back(static_cast<char32_t>(x));
  }
}

}  // namespace lf
