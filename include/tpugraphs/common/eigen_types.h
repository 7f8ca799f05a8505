// The one place that fixes Eigen vocabulary for tpugraphs.
//
// Matrices are row-major: a row is one node (or one configuration), which matches the release
// arrays ([n, features]) so data can be mapped without copies, and makes per-node gathers and
// scatters contiguous. Kernels are templated on the scalar type so that gradient checks can run
// the same code in double while training runs in float.
#ifndef TPUGRAPHS_COMMON_EIGEN_TYPES_H_
#define TPUGRAPHS_COMMON_EIGEN_TYPES_H_

#include <Eigen/Core>

namespace tpugraphs {

template <typename T>
using MatrixT = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using VectorT = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <typename T>
using RowVectorT = Eigen::Matrix<T, 1, Eigen::Dynamic>;
template <typename T>
using MatrixRefT = Eigen::Map<MatrixT<T>>;
template <typename T>
using ConstMatrixRefT = Eigen::Map<const MatrixT<T>>;
template <typename T>
using VectorRefT = Eigen::Map<VectorT<T>>;
template <typename T>
using ConstVectorRefT = Eigen::Map<const VectorT<T>>;

using Matrix = MatrixT<float>;
using Vector = VectorT<float>;
using MatrixRef = MatrixRefT<float>;
using ConstMatrixRef = ConstMatrixRefT<float>;

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_EIGEN_TYPES_H_
