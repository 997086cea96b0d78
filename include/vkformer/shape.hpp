#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace vkformer {

// A tensor shape of rank 0..4 (rank 0 is a scalar with one element). Row-major, contiguous.
class Shape {
 public:
  static constexpr int kMaxRank = 4;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t operator[](int axis) const;  // negative axes count from the end
  int64_t numel() const;
  std::vector<int64_t> dims() const { return {dims_.begin(), dims_.begin() + rank_}; }
  int64_t back() const { return (*this)[-1]; }

  // Elements between consecutive indices along `axis` (contiguous row-major).
  int64_t stride(int axis) const;

  // Same dims with the last one replaced, or with dims appended/removed.
  Shape with_last(int64_t d) const;
  Shape with(int axis, int64_t d) const;

  std::string str() const;  // "[2,3,5]"
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  int normalize(int axis) const;
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// Numpy broadcasting of two shapes (right-aligned; each dim equal or 1). Returns false if they
// do not broadcast.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

}  // namespace vkformer
