// Matrix products whose every output row is computed by the same instruction sequence, whatever
// the number of rows and wherever the row sits among them.
//
// The GNN stacks the rows of many configurations in one matrix ([k * rows_per_config, width]).
// A general GEMM (Eigen's, BLAS) splits the rows of a product into register panels of a packet
// width (4, 8 or 16 floats on SSE, AVX2, AVX-512) and handles what is left over with narrower
// packets or scalar code. With fused multiply-add in the packets and separate multiply and add
// in the scalar code, the last bits of a row's result depend on which of the two paths it took,
// so a configuration's score changed with the configurations scored beside it, and with the
// machine's packet width. Here the packets run along the output's columns instead: row r of
// C = A B is, for every column j, the chain
//     acc = 0; for p in 0..K-1: acc = fma(A[r, p], B[p, j], acc)
// (one rounding per step on machines with FMA, a rounded product then a rounded sum without),
// whatever path the row takes through the kernel. The result of a row is therefore a function of
// that row of A and of B alone: the property the scoring and training paths promise
// (docs/model.md, "Scores do not depend on their neighbours").
//
// RowProductReference is the plain loop with the same arithmetic; the fast kernel must equal it
// bit for bit (tests/model/row_product_test.cc).
#ifndef TPUGRAPHS_MODEL_ROW_PRODUCT_H_
#define TPUGRAPHS_MODEL_ROW_PRODUCT_H_

#include <cmath>
#include <cstdint>

#include "tpugraphs/common/eigen_types.h"

namespace tpugraphs::model {

// One step of the chain, as the packets compute it: fused where the build has FMA.
template <typename T>
inline T RowFma(T a, T b, T c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// C[r, :] (=, or += when accumulate) A[r, :] * B for r in [0, rows).
// A: [rows, K] with row stride lda; B: [K, N] with row stride ldb; C: [rows, N] with row stride
// ldc. C must not overlap A or B. With accumulate, C[r, j] + (the chain) is added last.
template <typename T>
void RowProduct(const T* A, int64_t rows, int64_t K, int64_t lda, const T* B, int64_t N,
                int64_t ldb, T* C, int64_t ldc, bool accumulate);

// The same, as a loop over (r, j, p).
template <typename T>
void RowProductReference(const T* A, int64_t rows, int64_t K, int64_t lda, const T* B, int64_t N,
                         int64_t ldb, T* C, int64_t ldc, bool accumulate);

// Eigen front-ends (row-major operands, any outer stride).
// C = A * B, C resized to [A.rows(), B.cols()].
template <typename T, typename DerivedA, typename DerivedB>
void RowProductInto(const DerivedA& A, const DerivedB& B, MatrixT<T>* C) {
  C->resize(A.rows(), B.cols());
  RowProduct<T>(A.data(), A.rows(), A.cols(), A.outerStride(), B.data(), B.cols(),
                B.outerStride(), C->data(), B.cols(), /*accumulate=*/false);
}
// C += A * B (C already [A.rows(), B.cols()]; C may be a block with an outer stride).
template <typename T, typename DerivedA, typename DerivedB, typename DerivedC>
void RowProductAdd(const DerivedA& A, const DerivedB& B, DerivedC&& C) {
  RowProduct<T>(A.data(), A.rows(), A.cols(), A.outerStride(), B.data(), B.cols(),
                B.outerStride(), C.data(), C.outerStride(), /*accumulate=*/true);
}
// C = A * B^T for a row-major B [N, K] (the adjoint of a row product): B is transposed into a
// contiguous [K, N] copy first, so every row again takes the same path.
template <typename T, typename DerivedA, typename DerivedB>
void RowProductTransposedInto(const DerivedA& A, const DerivedB& B, MatrixT<T>* C) {
  const MatrixT<T> bt = B.transpose();
  RowProductInto<T>(A, bt, C);
}

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_ROW_PRODUCT_H_
