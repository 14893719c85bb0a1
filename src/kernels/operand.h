// Operands as kernels and products take them: one buffer in one element type, which the view
// carries (docs/design.md, "One operand type carries its dtype").
#pragma once
#include <cstddef>
#include <cstdint>

namespace lf {

// The element type of an operand's data.
enum class DataType : uint8_t {
  f32,   // float
  bf16,  // bfloat16 (uint16_t), rounded to nearest even from f32
  int8,  // rows quantized to int8 with one scale per row: stored as q + 128 (uint8_t), qmax 127
};
const char* data_type_name(DataType t);

// A view of an operand: its data, in one dtype, and its per-row scales when int8. A pointer
// converts and says its dtype (float: f32, uint16_t: bf16); the kernels dispatch on `dtype`
// once per op. Rows are dense unless a kernel takes a leading dimension (a bf16 operand of a
// product is always dense: leading dimension = its stored column count).
struct Tensor {
  void* data = nullptr;
  DataType dtype = DataType::f32;
  float* scale = nullptr;  // int8: [rows]

  Tensor() = default;
  Tensor(float* f) : data(f) {}                            // NOLINT: an f32 buffer converts
  Tensor(uint16_t* h) : data(h), dtype(DataType::bf16) {}  // NOLINT: a bf16 buffer converts
  Tensor(uint8_t* q, float* s) : data(q), dtype(DataType::int8), scale(s) {}

  explicit operator bool() const { return data != nullptr; }
  bool is(DataType t) const { return data && dtype == t; }
  // The data as its dtype's pointer: null when the view is empty or of another dtype.
  float* f32() const { return is(DataType::f32) ? static_cast<float*>(data) : nullptr; }
  uint16_t* bf16() const { return is(DataType::bf16) ? static_cast<uint16_t*>(data) : nullptr; }
  uint8_t* int8() const { return is(DataType::int8) ? static_cast<uint8_t*>(data) : nullptr; }
  // The view from element i on (f32, bf16), or from row i of `cols` elements (int8: its scale
  // too).
  Tensor at(int64_t i) const;
  Tensor row(int64_t i, int64_t cols) const;
};

// The same, read only.
struct TensorIn {
  const void* data = nullptr;
  DataType dtype = DataType::f32;
  const float* scale = nullptr;

  TensorIn() = default;
  TensorIn(const float* f) : data(f) {}                            // NOLINT
  TensorIn(const uint16_t* h) : data(h), dtype(DataType::bf16) {}  // NOLINT
  TensorIn(const uint8_t* q, const float* s) : data(q), dtype(DataType::int8), scale(s) {}
  TensorIn(const Tensor& t) : data(t.data), dtype(t.dtype), scale(t.scale) {}  // NOLINT

  explicit operator bool() const { return data != nullptr; }
  bool is(DataType t) const { return data && dtype == t; }
  const float* f32() const { return is(DataType::f32) ? static_cast<const float*>(data) : nullptr; }
  const uint16_t* bf16() const {
    return is(DataType::bf16) ? static_cast<const uint16_t*>(data) : nullptr;
  }
  const uint8_t* int8() const {
    return is(DataType::int8) ? static_cast<const uint8_t*>(data) : nullptr;
  }
  TensorIn at(int64_t i) const;
  TensorIn row(int64_t i, int64_t cols) const;
};

inline size_t data_type_bytes(DataType t) {
  return t == DataType::f32    ? sizeof(float)
         : t == DataType::bf16 ? sizeof(uint16_t)
                               : sizeof(uint8_t);
}

inline Tensor Tensor::at(int64_t i) const {
  Tensor t = *this;
  if (data) t.data = static_cast<char*>(data) + i * static_cast<int64_t>(data_type_bytes(dtype));
  return t;
}
inline Tensor Tensor::row(int64_t i, int64_t cols) const {
  Tensor t = at(i * cols);
  if (scale) t.scale = scale + i;
  return t;
}
inline TensorIn TensorIn::at(int64_t i) const {
  TensorIn t = *this;
  if (data)
    t.data = static_cast<const char*>(data) + i * static_cast<int64_t>(data_type_bytes(dtype));
  return t;
}
inline TensorIn TensorIn::row(int64_t i, int64_t cols) const {
  TensorIn t = at(i * cols);
  if (scale) t.scale = scale + i;
  return t;
}

inline const char* data_type_name(DataType t) {
  return t == DataType::f32 ? "f32" : t == DataType::bf16 ? "bf16" : "int8";
}

}  // namespace lf
