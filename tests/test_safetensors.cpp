// Tests for io/safetensors: round trips, hand-built and independently built files, and every
// kind of malformed file. (io/file_util: test_file_util.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/safetensors.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

using lf::test::TempDir;

using lf::test::u64_le;
using lf::test::write_text;

// A safetensors file assembled by hand: length prefix, header text as given, data bytes.
std::string make_file(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

void append_u16(std::string& s, uint16_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>(v >> 8));
}

template <typename T>
void append_le(std::string& s, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // the tests run on little-endian hosts (as does the library)
  s.append(reinterpret_cast<const char*>(b), sizeof(T));
}

// Expects constructing a reader on `bytes` to throw lf::Error whose message contains `phrase`
// (and names the file).
void expect_rejected(const TempDir& tmp, const std::string& bytes, const std::string& phrase) {
  const std::string path = tmp.file("bad.safetensors");
  write_text(path, bytes);
  try {
    lf::SafeTensorsReader r(path);
    ADD_FAILURE() << "accepted a malformed file; expected an error containing '" << phrase << "'";
  } catch (const lf::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(phrase), std::string::npos) << "message: " << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
  }
}

// A single-tensor header for a tensor "t" of `dtype` and `shape` (JSON text, as given) over
// [begin, end).
std::string tensor_header(const std::string& dtype, const std::string& shape, uint64_t begin,
                          uint64_t end) {
  return "{\"t\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}}";
}

std::string f32_header(const std::string& shape, uint64_t begin, uint64_t end) {
  return tensor_header("F32", shape, begin, end);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Round trips through the writer

TEST(SafeTensorsTest, RoundTripF32I32I64AndMetadata) {
  TempDir tmp;
  const std::string path = tmp.file("model.safetensors");

  std::vector<float> w(2 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i) - 1.25f;
  std::vector<int32_t> ids = {7, -3, 0, 2147483647};
  std::vector<int64_t> big = {int64_t(1) << 40, -5, 0, std::numeric_limits<int64_t>::min()};
  float scalar = 3.75f;
  std::vector<float> odd = {1.f, 2.f, 3.f};  // odd count: the next tensor is not 8-aligned

  {
    lf::SafeTensorsWriter wr;
    wr.set_metadata("format", "pt");
    wr.set_metadata("config", "{\"d_model\": 64}");
    // Data copied at add time: the caller's buffers may change afterwards.
    std::vector<float> w_copy = w;
    wr.add_f32("layer.weight", {2, 3}, w_copy.data());
    w_copy.assign(w_copy.size(), 99.f);
    wr.add_i32("ids", {4}, ids.data());
    wr.add_f32("odd", {3}, odd.data());
    wr.add_i64("big", {2, 2}, big.data());
    wr.add_f32("scalar", {}, &scalar);
    wr.add_f32("empty", {0, 5}, nullptr);
    wr.write(path);
  }
  ASSERT_TRUE(fs::exists(path));

  // Header length is a multiple of 8 and the file has no gaps.
  const std::string bytes = lf::read_file(path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(header_len % 8, 0u);
  const uint64_t data_bytes = 6 * 4 + 4 * 4 + 3 * 4 + 4 * 8 + 4;
  EXPECT_EQ(bytes.size(), 8 + header_len + data_bytes);

  lf::SafeTensorsReader r(path);
  EXPECT_EQ(r.path(), path);
  EXPECT_EQ(r.data_size(), data_bytes);
  EXPECT_EQ(r.names(),
            (std::vector<std::string>{"big", "empty", "ids", "layer.weight", "odd", "scalar"}));
  ASSERT_EQ(r.metadata().size(), 2u);
  EXPECT_EQ(r.metadata().at("format"), "pt");
  EXPECT_EQ(r.metadata().at("config"), "{\"d_model\": 64}");
  EXPECT_TRUE(r.has("ids"));
  EXPECT_FALSE(r.has("__metadata__"));
  EXPECT_FALSE(r.has("nope"));

  const lf::TensorInfo& wi = r.info("layer.weight");
  EXPECT_EQ(wi.dtype, lf::DType::F32);
  EXPECT_EQ(wi.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(wi.numel(), 6);
  EXPECT_EQ(wi.begin, 0u);  // insertion order
  EXPECT_EQ(wi.end, 24u);
  EXPECT_EQ(r.info("ids").begin, 24u);

  std::vector<int64_t> shape;
  EXPECT_EQ(r.read_f32("layer.weight", &shape), w);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> dst(6, 0.f);
  r.read_f32("layer.weight", {2, 3}, dst.data());
  EXPECT_EQ(dst, w);
  EXPECT_EQ(r.read_f32("odd"), odd);

  EXPECT_EQ(r.info("ids").dtype, lf::DType::I32);
  EXPECT_EQ(r.read_i64("ids", &shape), (std::vector<int64_t>{7, -3, 0, 2147483647}));
  EXPECT_EQ(shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(r.info("big").dtype, lf::DType::I64);
  EXPECT_EQ(r.read_i64("big"), big);

  EXPECT_EQ(r.info("scalar").numel(), 1);
  EXPECT_TRUE(r.info("scalar").shape.empty());
  EXPECT_EQ(r.read_f32("scalar"), std::vector<float>{3.75f});
  EXPECT_EQ(r.info("empty").numel(), 0);
  EXPECT_TRUE(r.read_f32("empty").empty());

  // serialize() is exactly what write() stored.
  lf::SafeTensorsWriter again;
  again.set_metadata("k", "v");
  again.add_i32("ids", {4}, ids.data());
  const std::string p2 = tmp.file("two.safetensors");
  again.write(p2);
  EXPECT_EQ(lf::read_file(p2), again.serialize());
}

TEST(SafeTensorsTest, NoMetadataWritesNoMetadataKey) {
  TempDir tmp;
  const std::string path = tmp.file("m.safetensors");
  lf::SafeTensorsWriter wr;
  float v = 1.f;
  wr.add_f32("x", {1}, &v);
  wr.write(path);
  EXPECT_EQ(lf::read_file(path).find("__metadata__"), std::string::npos);
  lf::SafeTensorsReader r(path);
  EXPECT_TRUE(r.metadata().empty());
  EXPECT_EQ(r.read_f32("x"), std::vector<float>{1.f});
}

TEST(SafeTensorsTest, WriterRejectsBadInput) {
  lf::SafeTensorsWriter wr;
  float v[4] = {0, 1, 2, 3};
  wr.add_f32("a", {4}, v);
  EXPECT_THROW(wr.add_f32("a", {4}, v), lf::Error);
  EXPECT_THROW(wr.add_f32("__metadata__", {4}, v), lf::Error);
  EXPECT_THROW(wr.add_f32("neg", {-1, 4}, v), lf::Error);
  EXPECT_THROW(wr.add_f32("null", {4}, nullptr), lf::Error);
  EXPECT_THROW(wr.add_f32("huge", {int64_t(1) << 62, int64_t(1) << 62}, v), lf::Error);
  EXPECT_EQ(wr.size(), 1u);
}

TEST(SafeTensorsTest, WriteIntoMissingDirectoryThrows) {
  TempDir tmp;
  lf::SafeTensorsWriter wr;
  float v = 1.f;
  wr.add_f32("x", {1}, &v);
  const std::string path = tmp.file("no/such/dir/x.safetensors");
  try {
    wr.write(path);
    ADD_FAILURE() << "write into a missing directory succeeded";
  } catch (const lf::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Files built byte by byte (independently of the writer)

TEST(SafeTensorsTest, ReadsHandBuiltF16AndBF16) {
  TempDir tmp;
  // F16: 1.0, -2.5, 0.15625, smallest subnormal 2^-24, -0, +inf, NaN
  std::string data;
  for (uint16_t h : {0x3C00, 0xC100, 0x3100, 0x0001, 0x8000, 0x7C00, 0x7E00}) append_u16(data, h);
  const uint64_t f16_end = data.size();  // 14
  // BF16: 1.0, -2.5, 0.15625, -inf
  for (uint16_t b : {0x3F80, 0xC020, 0x3E20, 0xFF80}) append_u16(data, b);
  const uint64_t bf16_end = data.size();  // 22
  std::string header = "{\"half\":{\"dtype\":\"F16\",\"shape\":[7],\"data_offsets\":[0," +
                       std::to_string(f16_end) +
                       "]},\"brain\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[" +
                       std::to_string(f16_end) + "," + std::to_string(bf16_end) + "]}}";
  const std::string path = tmp.file("half.safetensors");
  write_text(path, make_file(header, data));

  lf::SafeTensorsReader r(path);
  EXPECT_EQ(r.info("half").dtype, lf::DType::F16);
  EXPECT_EQ(r.info("brain").dtype, lf::DType::BF16);
  std::vector<float> h = r.read_f32("half");
  ASSERT_EQ(h.size(), 7u);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.5f);
  EXPECT_EQ(h[2], 0.15625f);
  EXPECT_EQ(h[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(h[4], 0.0f);
  EXPECT_TRUE(std::signbit(h[4]));
  EXPECT_TRUE(std::isinf(h[5]) && h[5] > 0);
  EXPECT_TRUE(std::isnan(h[6]));

  std::vector<float> b(4);
  r.read_f32("brain", {2, 2}, b.data());
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], -2.5f);
  EXPECT_EQ(b[2], 0.15625f);
  EXPECT_TRUE(std::isinf(b[3]) && b[3] < 0);

  EXPECT_THROW(r.read_i64("half"), lf::Error);
}

TEST(SafeTensorsTest, ReadsIndependentlyBuiltFile) {
  TempDir tmp;
  // Layout chosen by hand: an F64, an F32, an I64, I16/I8/U8/BOOL tensors, a gap-free buffer,
  // unpadded header with whitespace and keys in non-sorted order.
  std::string data;
  append_le<double>(data, 0.1);
  append_le<double>(data, -1e10);  // [0,16)
  append_le<float>(data, 2.5f);
  append_le<float>(data, -0.75f);
  append_le<float>(data, 8.0f);  // [16,28)
  append_le<int64_t>(data, -9000000000LL);
  append_le<int64_t>(data, 42);  // [28,44)
  append_le<int16_t>(data, -300);
  append_le<int16_t>(data, 300);           // [44,48)
  append_le<int8_t>(data, -7);             // [48,49)
  data.push_back(static_cast<char>(200));  // U8 [49,50)
  data.push_back(0);
  data.push_back(5);  // BOOL [50,52)
  const std::string header =
      "{ \"zeta\": {\"shape\": [2], \"dtype\": \"F64\", \"data_offsets\": [0, 16]},\n"
      "  \"alpha\": {\"data_offsets\": [16, 28], \"dtype\": \"F32\", \"shape\": [3, 1]},\n"
      "  \"__metadata__\": {\"note\": \"h\\u00e9llo\"},\n"
      "  \"ints\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [28, 44]},\n"
      "  \"shorts\": {\"dtype\": \"I16\", \"shape\": [1, 2], \"data_offsets\": [44, 48]},\n"
      "  \"bytes\": {\"dtype\": \"I8\", \"shape\": [1], \"data_offsets\": [48, 49]},\n"
      "  \"ubytes\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [49, 50]},\n"
      "  \"flags\": {\"dtype\": \"BOOL\", \"shape\": [2], \"data_offsets\": [50, 52]} }";
  const std::string path = tmp.file("hand.safetensors");
  write_text(path, make_file(header, data));

  lf::SafeTensorsReader r(path);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"alpha", "bytes", "flags", "ints", "shorts",
                                                 "ubytes", "zeta"}));
  EXPECT_EQ(r.metadata().at("note"), "h\xc3\xa9llo");
  std::vector<int64_t> shape;
  EXPECT_EQ(r.read_f32("zeta", &shape), (std::vector<float>{0.1f, -1e10f}));
  EXPECT_EQ(shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.read_f32("alpha", &shape), (std::vector<float>{2.5f, -0.75f, 8.0f}));
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(r.info("alpha").begin, 16u);
  EXPECT_EQ(r.info("alpha").end, 28u);
  EXPECT_EQ(r.read_i64("ints"), (std::vector<int64_t>{-9000000000LL, 42}));
  EXPECT_EQ(r.read_i64("shorts", &shape), (std::vector<int64_t>{-300, 300}));
  EXPECT_EQ(shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.read_i64("bytes"), (std::vector<int64_t>{-7}));
  EXPECT_EQ(r.read_i64("ubytes"), (std::vector<int64_t>{200}));
  EXPECT_EQ(r.read_i64("flags"), (std::vector<int64_t>{0, 1}));
  EXPECT_THROW(r.read_f32("ints"), lf::Error);
}

TEST(SafeTensorsTest, EmptyHeaderObjectIsValid) {
  TempDir tmp;
  const std::string path = tmp.file("empty.safetensors");
  write_text(path, make_file("{}      ", ""));
  lf::SafeTensorsReader r(path);
  EXPECT_TRUE(r.names().empty());
  EXPECT_TRUE(r.metadata().empty());
}

// ---------------------------------------------------------------------------------------------
// Read errors

TEST(SafeTensorsTest, ShapeMismatchNamesBothShapes) {
  TempDir tmp;
  const std::string path = tmp.file("s.safetensors");
  lf::SafeTensorsWriter wr;
  std::vector<float> v(6, 1.f);
  wr.add_f32("w", {2, 3}, v.data());
  wr.write(path);
  lf::SafeTensorsReader r(path);
  std::vector<float> dst(6);
  try {
    r.read_f32("w", {3, 2}, dst.data());
    ADD_FAILURE() << "shape mismatch accepted";
  } catch (const lf::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  }
  EXPECT_THROW(r.read_f32("w", {6}, dst.data()), lf::Error);
  r.read_f32("w", {2, 3}, dst.data());  // and the right shape works
}

TEST(SafeTensorsTest, ReadI64OnFloatTensorRejected) {
  TempDir tmp;
  const std::string path = tmp.file("f.safetensors");
  lf::SafeTensorsWriter wr;
  float v[2] = {1.f, 2.f};
  int32_t ids[2] = {1, 2};
  wr.add_f32("w", {2}, v);
  wr.add_i32("ids", {2}, ids);
  wr.write(path);
  lf::SafeTensorsReader r(path);
  try {
    r.read_i64("w");
    ADD_FAILURE() << "read_i64 accepted F32";
  } catch (const lf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("floating"), std::string::npos) << e.what();
  }
  try {
    r.read_f32("ids");
    ADD_FAILURE() << "read_f32 accepted I32";
  } catch (const lf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("floating"), std::string::npos) << e.what();
  }
}

TEST(SafeTensorsTest, MissingTensorNamed) {
  TempDir tmp;
  const std::string path = tmp.file("m.safetensors");
  write_text(path, make_file("{}", ""));
  lf::SafeTensorsReader r(path);
  try {
    r.info("encoder.x");
    ADD_FAILURE() << "missing tensor found";
  } catch (const lf::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path + ": tensor 'encoder.x' not found"), std::string::npos) << msg;
  }
  EXPECT_THROW(r.read_f32("encoder.x"), lf::Error);
  EXPECT_THROW(r.read_i64("encoder.x"), lf::Error);
}

TEST(SafeTensorsTest, MissingFileNamed) {
  TempDir tmp;
  const std::string path = tmp.file("absent.safetensors");
  try {
    lf::SafeTensorsReader r(path);
    ADD_FAILURE() << "missing file opened";
  } catch (const lf::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cannot open " + path), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::strerror(ENOENT)), std::string::npos) << msg;
  }
}

// ---------------------------------------------------------------------------------------------
// Malformed files

TEST(SafeTensorsMalformedTest, FileTooShort) {
  TempDir tmp;
  expect_rejected(tmp, "", "too short");
  expect_rejected(tmp, std::string("\x02\x00\x00", 3), "too short");
}

TEST(SafeTensorsMalformedTest, HeaderLength) {
  TempDir tmp;
  expect_rejected(tmp, u64_le(200'000'000) + "{}", "absurd");
  expect_rejected(tmp, u64_le(~uint64_t(0)), "absurd");
  expect_rejected(tmp, u64_le(100) + "{}", "exceeds the file size");
}

TEST(SafeTensorsMalformedTest, HeaderNotJsonObject) {
  TempDir tmp;
  expect_rejected(tmp, make_file("{\"t\": ", ""), "not valid JSON");
  expect_rejected(tmp, make_file("", ""), "not valid JSON");
  expect_rejected(tmp, make_file("{} trailing", ""), "not valid JSON");
  expect_rejected(tmp, make_file("{\"a\":\"\xff\"}", ""), "not valid JSON");  // bad UTF-8
  expect_rejected(tmp, make_file("[1, 2]", ""), "not a JSON object");
  expect_rejected(tmp, make_file("42", ""), "not a JSON object");
}

TEST(SafeTensorsMalformedTest, EntryShape) {
  TempDir tmp;
  const std::string d(8, '\0');
  expect_rejected(tmp, make_file("{\"t\": 5}", d), "not a JSON object");
  expect_rejected(tmp, make_file("{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", d),
                  "missing 'dtype'");
  expect_rejected(tmp, make_file("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", d),
                  "missing 'shape'");
  expect_rejected(tmp, make_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", d),
                  "missing 'data_offsets'");
  expect_rejected(tmp, make_file("{\"t\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", d),
                  "'dtype' must be a string");
  expect_rejected(tmp, make_file(f32_header("2", 0, 8), d), "'shape' must be an array");
  expect_rejected(tmp, make_file(f32_header("[2.0]", 0, 8), d), "not an integer");
  expect_rejected(tmp, make_file(f32_header("[\"2\"]", 0, 8), d), "not an integer");
  expect_rejected(tmp, make_file(tensor_header("F8", "[2]", 0, 8), d), "unknown dtype 'F8'");
  expect_rejected(tmp, make_file(tensor_header("f32", "[2]", 0, 8), d), "unknown dtype");
  expect_rejected(tmp, make_file(f32_header("[-2]", 0, 8), d), "negative dimension");
  expect_rejected(tmp, make_file(f32_header("[2, -1]", 0, 8), d), "negative dimension");
}

TEST(SafeTensorsMalformedTest, DataOffsets) {
  TempDir tmp;
  const std::string d(16, '\0');
  auto with_offsets = [](const std::string& offsets) {
    return "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" + offsets + "}}";
  };
  for (const char* offsets :
       {"[0]", "[0, 8, 16]", "[\"0\", 8]", "[-8, 0]", "[0, 8.0]", "{\"a\": 0}"})
    expect_rejected(tmp, make_file(with_offsets(offsets), d),
                    "data_offsets must be two non-negative integers");
  expect_rejected(tmp, make_file(with_offsets("[8, 0]"), d), "begin 8 > end 0");
  expect_rejected(tmp, make_file(with_offsets("[16, 24]"), d), "beyond the data buffer");
  expect_rejected(tmp, make_file(with_offsets("[0, 18446744073709551615]"), d),
                  "beyond the data buffer");
}

TEST(SafeTensorsMalformedTest, ByteSizeMismatch) {
  TempDir tmp;
  const std::string d(16, '\0');
  expect_rejected(tmp, make_file(f32_header("[3]", 0, 8), d), "does not match shape [3]");
  for (const std::string& header :
       {f32_header("[1]", 0, 16), f32_header("[]", 0, 0), tensor_header("I64", "[2]", 0, 8)})
    expect_rejected(tmp, make_file(header, d), "does not match");
}

TEST(SafeTensorsMalformedTest, SizeOverflowGuarded) {
  TempDir tmp;
  const std::string d(16, '\0');
  // 2^32 * 2^32 elements overflows 64 bits; 2^62 F32 elements overflows the byte count.
  expect_rejected(tmp, make_file(f32_header("[4294967296, 4294967296]", 0, 16), d), "overflow");
  expect_rejected(tmp, make_file(f32_header("[4611686018427387904]", 0, 16), d), "overflow");
  expect_rejected(tmp, make_file(f32_header("[18446744073709551615]", 0, 16), d), "too large");
  // A zero dimension makes the tensor empty however large the others are.
  const std::string path = tmp.file("zero.safetensors");
  write_text(path, make_file(f32_header("[4294967296, 4294967296, 0]", 0, 0), d));
  lf::SafeTensorsReader r(path);
  EXPECT_EQ(r.info("t").numel(), 0);
}

TEST(SafeTensorsMalformedTest, OverlappingTensors) {
  TempDir tmp;
  const std::string d(16, '\0');
  expect_rejected(tmp,
                  make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                            "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                            d),
                  "overlap");
  expect_rejected(tmp,
                  make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                            "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                            d),
                  "overlap");
  expect_rejected(tmp,
                  make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                            "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
                            d),
                  "overlap");
  // Adjacent tensors and an empty tensor at a shared boundary are fine.
  const std::string path = tmp.file("ok.safetensors");
  write_text(path, make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                            "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                            "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                            d));
  lf::SafeTensorsReader r(path);
  EXPECT_EQ(r.names().size(), 3u);
}

TEST(SafeTensorsMalformedTest, DuplicateNames) {
  TempDir tmp;
  const std::string d(16, '\0');
  expect_rejected(tmp,
                  make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                            "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                            d),
                  "duplicate key 'a'");
}

TEST(SafeTensorsMalformedTest, Metadata) {
  TempDir tmp;
  expect_rejected(tmp, make_file("{\"__metadata__\":{\"epoch\":3}}", ""),
                  "metadata value for key 'epoch' is not a string");
  expect_rejected(tmp, make_file("{\"__metadata__\":{\"a\":\"x\",\"b\":null}}", ""),
                  "metadata value for key 'b'");
  expect_rejected(tmp, make_file("{\"__metadata__\":[\"x\"]}", ""),
                  "__metadata__ is not a JSON object");
}
