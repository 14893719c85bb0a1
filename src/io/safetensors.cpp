#include "linformer/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/limits.h"
#include "io/json_read.h"
#include "linformer/error.h"
#include "linformer/file_util.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors I/O assumes a little-endian host"
#endif

namespace lf {

namespace {

struct DTypeEntry {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::F64, "F64", 8},   {DType::F32, "F32", 4}, {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8}, {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},   {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1},
};

const DTypeEntry& entry_of(DType d) {
  for (const auto& e : kDTypes)
    if (e.dtype == d) return e;
  fail("invalid DType value ", static_cast<int>(d));
}

// numel of a shape, or false when it does not fit in int64.
bool checked_numel(const std::vector<int64_t>& shape, uint64_t* out) {
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) {
      *out = 0;
      return true;
    }
  }
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = n;
  return true;
}

uint64_t load_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

const char* dtype_name(DType d) { return entry_of(d).name; }
size_t dtype_size(DType d) { return entry_of(d).size; }

bool dtype_is_float(DType d) {
  return d == DType::F64 || d == DType::F32 || d == DType::F16 || d == DType::BF16;
}

bool parse_dtype(const std::string& name, DType* out) {
  for (const auto& e : kDTypes) {
    if (name == e.name) {
      *out = e.dtype;
      return true;
    }
  }
  return false;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;  // signed zero
    } else {
      // Subnormal half: mant * 2^-24, exactly representable as a normal float.
      float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
      return sign ? -v : v;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float bf16_to_f32(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

int64_t TensorInfo::numel() const {
  // The reader has checked that the count fits in int64; a zero dimension makes it 0 however
  // large the others are (and must be seen before any product could overflow).
  uint64_t n = 0;
  LF_CHECK(checked_numel(shape, &n), "tensor '", name, "': shape ", shape_to_string(shape),
           " has no valid element count");
  return static_cast<int64_t>(n);
}

// ---------------------------------------------------------------------------------------------
// Reader

SafeTensorsReader::SafeTensorsReader(const std::string& path) : path_(path) {
  auto file = std::make_shared<MappedFile>(path);
  const unsigned char* bytes = file->data();
  const uint64_t size = file->size();
  LF_CHECK(size >= 8, path, ": file too short to be safetensors (", size,
           " bytes, need at least 8 for the header length)");
  const uint64_t header_len = load_u64_le(bytes);
  LF_CHECK(header_len <= kMaxHeaderBytes, path, ": header length ", header_len,
           " is absurd (limit ", kMaxHeaderBytes, " bytes); not a safetensors file?");
  LF_CHECK(header_len <= size - 8, path, ": header length ", header_len, " exceeds the file size (",
           size, " bytes)");
  data_ = bytes + 8 + header_len;
  data_size_ = size - 8 - header_len;
  const char* hb = reinterpret_cast<const char*>(bytes + 8);
  parse_header(hb, hb + header_len);
  file_ = std::move(file);
}

void SafeTensorsReader::parse_header(const char* hbegin, const char* hend) {
  using nlohmann::json;
  const std::string& p = path_;

  // Detect duplicate keys (nlohmann would silently keep the last one).
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  json::parser_callback_t cb = [&](int /*depth*/, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string()) {
          const auto& k = parsed.get_ref<const std::string&>();
          if (!open_objects.back().insert(k).second && duplicate.empty()) duplicate = k;
        }
        break;
      default:
        break;
    }
    return true;
  };

  const json header = parse_json_bounded(hbegin, hend, p + ": header", cb);
  LF_CHECK(header.is_object(), p, ": header is not a JSON object (got ", header.type_name(), ")");
  LF_CHECK(duplicate.empty(), p, ": header has a duplicate key '", duplicate, "'");

  struct Range {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Range> ranges;

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();

    if (name == "__metadata__") {
      LF_CHECK(v.is_object(), p, ": __metadata__ is not a JSON object (got ", v.type_name(), ")");
      for (auto m = v.begin(); m != v.end(); ++m) {
        LF_CHECK(m.value().is_string(), p, ": metadata value for key '", m.key(),
                 "' is not a string (got ", m.value().type_name(), ")");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }

    const std::string where = p + ": tensor '" + name + "'";
    LF_CHECK(v.is_object(), where, ": entry is not a JSON object (got ", v.type_name(), ")");

    TensorInfo info;
    info.name = name;

    auto dt = v.find("dtype");
    LF_CHECK(dt != v.end(), where, ": missing 'dtype'");
    LF_CHECK(dt->is_string(), where, ": 'dtype' must be a string (got ", dt->type_name(), ")");
    const std::string dname = dt->get<std::string>();
    LF_CHECK(parse_dtype(dname, &info.dtype), where, ": unknown dtype '", dname, "'");

    auto sh = v.find("shape");
    LF_CHECK(sh != v.end(), where, ": missing 'shape'");
    LF_CHECK(sh->is_array(), where, ": 'shape' must be an array (got ", sh->type_name(), ")");
    LF_CHECK(sh->size() <= static_cast<size_t>(limits::kMaxTensorRank), where, ": shape has ",
             sh->size(), " dimensions (limit ", limits::kMaxTensorRank, ")");
    for (const json& d : *sh) {
      LF_CHECK(d.is_number_integer(), where, ": shape dimension ", json_excerpt(d),
               " is not an integer");
      if (d.is_number_unsigned()) {
        uint64_t u = d.get<uint64_t>();
        LF_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), where,
                 ": shape dimension ", u, " is too large");
        info.shape.push_back(static_cast<int64_t>(u));
      } else {
        int64_t s = d.get<int64_t>();
        LF_CHECK(s >= 0, where, ": negative dimension ", s, " in shape ", json_excerpt(*sh));
        info.shape.push_back(s);
      }
    }

    auto off = v.find("data_offsets");
    LF_CHECK(off != v.end(), where, ": missing 'data_offsets'");
    LF_CHECK(off->is_array() && off->size() == 2 && (*off)[0].is_number_unsigned() &&
                 (*off)[1].is_number_unsigned(),
             where, ": data_offsets must be two non-negative integers [begin, end] (got ",
             json_excerpt(*off), ")");
    info.begin = (*off)[0].get<uint64_t>();
    info.end = (*off)[1].get<uint64_t>();
    LF_CHECK(info.begin <= info.end, where, ": data_offsets begin ", info.begin, " > end ",
             info.end);
    LF_CHECK(info.end <= data_size_, where, ": data_offsets end ", info.end,
             " is beyond the data buffer (", data_size_, " bytes)");

    uint64_t numel = 0, nbytes = 0;
    LF_CHECK(
        checked_numel(info.shape, &numel) &&
            !__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(info.dtype)), &nbytes),
        where, ": shape ", shape_to_string(info.shape), " of ", dname, " overflows the byte size");
    LF_CHECK(info.end - info.begin == nbytes, where, ": byte size ", info.end - info.begin,
             " (data_offsets [", info.begin, ", ", info.end, "]) does not match shape ",
             shape_to_string(info.shape), " of ", dname, " (", nbytes, " bytes)");

    auto ins = tensors_.emplace(name, std::move(info));
    const TensorInfo& stored = ins.first->second;
    if (stored.end > stored.begin) ranges.push_back({stored.begin, stored.end, &stored.name});
  }

  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < ranges.size(); ++i) {
    const Range& a = ranges[i - 1];
    const Range& b = ranges[i];
    LF_CHECK(b.begin >= a.end, p, ": tensors '", *a.name, "' [", a.begin, ", ", a.end, ") and '",
             *b.name, "' [", b.begin, ", ", b.end, ") overlap");
  }
}

const TensorInfo& SafeTensorsReader::info(const std::string& name) const {
  auto it = tensors_.find(name);
  LF_CHECK(it != tensors_.end(), path_, ": tensor '", name, "' not found");
  return it->second;
}

std::vector<std::string> SafeTensorsReader::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;  // std::map iterates in sorted order
}

const unsigned char* SafeTensorsReader::raw_data(const std::string& name) const {
  return data_ + info(name).begin;
}

void SafeTensorsReader::convert_f32(const TensorInfo& t, float* dst) const {
  LF_CHECK(dtype_is_float(t.dtype), path_, ": tensor '", t.name, "' has dtype ",
           dtype_name(t.dtype), "; expected a floating dtype (F32, F16, BF16 or F64)");
  const unsigned char* src = data_ + t.begin;
  const size_t n = static_cast<size_t>(t.numel());
  switch (t.dtype) {
    case DType::F32:
      if (n) std::memcpy(dst, src, n * sizeof(float));
      break;
    case DType::F64:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<double>(src + 8 * i));
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load<uint16_t>(src + 2 * i));
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load<uint16_t>(src + 2 * i));
      break;
    default:
      break;
  }
}

void SafeTensorsReader::read_f32(const std::string& name,
                                 const std::vector<int64_t>& expected_shape, float* dst) const {
  const TensorInfo& t = info(name);
  LF_CHECK(t.shape == expected_shape, path_, ": tensor '", name, "' has shape ",
           shape_to_string(t.shape), ", expected ", shape_to_string(expected_shape));
  convert_f32(t, dst);
}

std::vector<float> SafeTensorsReader::read_f32(const std::string& name,
                                               std::vector<int64_t>* shape_out) const {
  const TensorInfo& t = info(name);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  convert_f32(t, out.data());
  if (shape_out) *shape_out = t.shape;
  return out;
}

std::vector<int64_t> SafeTensorsReader::read_i64(const std::string& name,
                                                 std::vector<int64_t>* shape_out) const {
  const TensorInfo& t = info(name);
  LF_CHECK(!dtype_is_float(t.dtype), path_, ": tensor '", name, "' has floating dtype ",
           dtype_name(t.dtype), "; expected an integer dtype (I64, I32, I16, I8, U8)");
  const unsigned char* src = data_ + t.begin;
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<int64_t> out(n);
  switch (t.dtype) {
    case DType::I64:
      if (n) std::memcpy(out.data(), src, n * sizeof(int64_t));
      break;
    case DType::I32:
      for (size_t i = 0; i < n; ++i) out[i] = load<int32_t>(src + 4 * i);
      break;
    case DType::I16:
      for (size_t i = 0; i < n; ++i) out[i] = load<int16_t>(src + 2 * i);
      break;
    case DType::I8:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<int8_t>(src[i]);
      break;
    case DType::U8:
      for (size_t i = 0; i < n; ++i) out[i] = src[i];
      break;
    case DType::BOOL:
      for (size_t i = 0; i < n; ++i) out[i] = src[i] != 0;
      break;
    default:
      fail(path_, ": tensor '", name, "': unsupported dtype ", dtype_name(t.dtype));
  }
  if (shape_out) *shape_out = t.shape;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writer

void SafeTensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

bool SafeTensorsWriter::has(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return true;
  return false;
}

void SafeTensorsWriter::add_raw(const std::string& name, DType dtype,
                                const std::vector<int64_t>& shape, const void* bytes) {
  LF_CHECK(name != "__metadata__", "safetensors: '__metadata__' is reserved, not a tensor name");
  LF_CHECK(!has(name), "safetensors: tensor '", name, "' added twice");
  for (int64_t d : shape)
    LF_CHECK(d >= 0, "safetensors: tensor '", name, "' has a negative dimension in shape ",
             shape_to_string(shape));
  uint64_t numel = 0, nbytes = 0;
  LF_CHECK(checked_numel(shape, &numel) &&
               !__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(dtype)), &nbytes),
           "safetensors: tensor '", name, "' shape ", shape_to_string(shape),
           " overflows the byte size");
  LF_CHECK(nbytes == 0 || bytes != nullptr, "safetensors: tensor '", name, "' has null data");
  Entry e;
  e.name = name;
  e.dtype = dtype;
  e.shape = shape;
  if (nbytes) e.bytes.assign(static_cast<const char*>(bytes), static_cast<size_t>(nbytes));
  entries_.push_back(std::move(e));
}

void SafeTensorsWriter::add_f32(const std::string& name, const std::vector<int64_t>& shape,
                                const float* data) {
  add_raw(name, DType::F32, shape, data);
}

void SafeTensorsWriter::add_i64(const std::string& name, const std::vector<int64_t>& shape,
                                const int64_t* data) {
  add_raw(name, DType::I64, shape, data);
}

void SafeTensorsWriter::add_i32(const std::string& name, const std::vector<int64_t>& shape,
                                const int32_t* data) {
  add_raw(name, DType::I32, shape, data);
}

std::string SafeTensorsWriter::header_bytes() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& kv : metadata_) meta[kv.first] = kv.second;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    const uint64_t end = offset + e.bytes.size();
    header[e.name] = {
        {"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string json;
  try {
    json = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail("safetensors: cannot encode the header (tensor names and metadata must be UTF-8): ",
         e.what());
  }
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json;
}

std::string SafeTensorsWriter::serialize() const {
  std::string out = header_bytes();
  for (const auto& e : entries_) out += e.bytes;
  return out;
}

void SafeTensorsWriter::write(const std::string& path) const {
  const std::string head = header_bytes();
  write_file_atomic(path, [&](std::ostream& os) {
    os.write(head.data(), static_cast<std::streamsize>(head.size()));
    for (const auto& e : entries_)
      os.write(e.bytes.data(), static_cast<std::streamsize>(e.bytes.size()));
  });
}

}  // namespace lf
