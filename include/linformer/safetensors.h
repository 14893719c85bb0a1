// Reading and writing the safetensors format:
//   [u64 little-endian header length N][N bytes UTF-8 JSON header][data buffer]
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the start of the data buffer), plus an optional "__metadata__" object of strings.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lf {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* dtype_name(DType);  // "F32", ...
size_t dtype_size(DType);       // bytes per element
bool dtype_is_float(DType);     // F64, F32, F16, BF16
// Parses a safetensors dtype name ("F32", ...); returns false for an unknown name.
bool parse_dtype(const std::string& name, DType* out);

// "[2, 3]" (and "[]" for a scalar).
std::string shape_to_string(const std::vector<int64_t>& shape);

// IEEE half / bfloat16 bit patterns to float (exact).
float f16_to_f32(uint16_t bits);
float bf16_to_f32(uint16_t bits);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data buffer
  int64_t numel() const;        // product of shape (1 for a scalar)
};

class MappedFile;

// Opens and fully validates a safetensors file; tensors are decoded on request. Copies share
// the underlying file mapping.
class SafeTensorsReader {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  explicit SafeTensorsReader(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // throws "<path>: tensor 'x' not found"
  std::vector<std::string> names() const;                 // sorted

  // Converts F32/F16/BF16/F64 to float. Throws if the shape differs from expected_shape (the
  // message gives both) or the dtype is not floating. dst holds numel floats.
  void read_f32(const std::string& name, const std::vector<int64_t>& expected_shape,
                float* dst) const;
  std::vector<float> read_f32(const std::string& name,
                              std::vector<int64_t>* shape_out = nullptr) const;
  // Accepts I64/I32/I16/I8/U8 (and BOOL as 0/1), widened to int64; throws for floating dtypes.
  std::vector<int64_t> read_i64(const std::string& name,
                                std::vector<int64_t>* shape_out = nullptr) const;

  // The raw little-endian bytes of a tensor (info(name).end - begin bytes, no alignment).
  const unsigned char* raw_data(const std::string& name) const;
  // Size in bytes of the data buffer (everything after the header).
  uint64_t data_size() const { return data_size_; }

 private:
  void parse_header(const char* begin, const char* end);
  void convert_f32(const TensorInfo& info, float* dst) const;

  std::string path_;
  std::shared_ptr<const MappedFile> file_;
  const unsigned char* data_ = nullptr;  // start of the data buffer
  uint64_t data_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Collects tensors (copied) and writes them in insertion order. The header is padded with
// spaces so that the data buffer starts at a multiple of 8 bytes. Tensors are stored back to
// back (no gaps), as the reference safetensors implementation requires, so each tensor is
// aligned to 8 bytes whenever the tensors before it have sizes that are multiples of 8.
class SafeTensorsWriter {
 public:
  void set_metadata(const std::string& key, const std::string& value);
  // The writer copies the data (so callers may free their buffers).
  void add_f32(const std::string& name, const std::vector<int64_t>& shape, const float* data);
  void add_i64(const std::string& name, const std::vector<int64_t>& shape, const int64_t* data);
  void add_i32(const std::string& name, const std::vector<int64_t>& shape, const int32_t* data);
  // Any dtype: `bytes` holds numel * dtype_size(dtype) little-endian bytes.
  void add_raw(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
               const void* bytes);

  bool has(const std::string& name) const;
  size_t size() const { return entries_.size(); }

  // Atomic (write_file_atomic): a failed write leaves any existing file untouched.
  void write(const std::string& path) const;
  // The complete file content (what write() stores).
  std::string serialize() const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::string header_bytes() const;  // length prefix + padded JSON header
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace lf
