#include "vkformer/shape.hpp"

#include <algorithm>

#include "vkformer/error.hpp"

namespace vkformer {

namespace {
std::string dims_string(const int64_t* dims, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

void check_dims(const int64_t* dims, size_t n) {
  if (n > Shape::kMaxRank)
    throw Error(ErrorCode::invalid_argument,
                "shape of rank " + std::to_string(n) + ": vkformer tensors have rank 0 to 4");
  // Element counts stay below 2^48 so that byte sizes of any dtype fit in 64 bits. Zero dims are
  // left out of the product: strides multiply the other dims, so an empty shape must not get
  // past the limit either, whatever the order of its dims.
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  int64_t product = 1;
  for (size_t i = 0; i < n; ++i)
    if (dims[i] < 0)
      throw Error(ErrorCode::invalid_argument,
                  "shape has a negative dimension " + std::to_string(dims[i]));
  for (size_t i = 0; i < n; ++i)
    if (dims[i] != 0 &&
        (__builtin_mul_overflow(product, dims[i], &product) || product > kMaxElements))
      throw Error(ErrorCode::invalid_argument,
                  "shape " + dims_string(dims, n) +
                      ": its nonzero dimensions multiply to more than 2^48 elements");
}
}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims) {
  check_dims(dims.begin(), dims.size());
  std::copy(dims.begin(), dims.end(), dims_.begin());
  rank_ = static_cast<int>(dims.size());
}

Shape::Shape(const std::vector<int64_t>& dims) {
  check_dims(dims.data(), dims.size());
  std::copy(dims.begin(), dims.end(), dims_.begin());
  rank_ = static_cast<int>(dims.size());
}

int Shape::normalize(int axis) const {
  int a = axis < 0 ? axis + rank_ : axis;
  if (a < 0 || a >= rank_)
    throw Error(ErrorCode::invalid_argument,
                "axis " + std::to_string(axis) + " out of range for shape " + str());
  return a;
}

int64_t Shape::operator[](int axis) const { return dims_[normalize(axis)]; }

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::stride(int axis) const {
  int64_t s = 1;
  for (int i = rank_ - 1; i > normalize(axis); --i) s *= dims_[i];
  return s;
}

Shape Shape::with_last(int64_t d) const { return with(-1, d); }

Shape Shape::with(int axis, int64_t d) const {
  Shape s = *this;
  s.dims_[normalize(axis)] = d;
  check_dims(s.dims_.data(), static_cast<size_t>(s.rank_));
  return s;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ",";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  return rank_ == o.rank_ && std::equal(dims_.begin(), dims_.begin() + rank_, o.dims_.begin());
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    dims[i] = da == 1 ? db : da;
  }
  *out = Shape(dims);
  return true;
}

}  // namespace vkformer
