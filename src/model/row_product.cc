// The row-independent product kernel (include/tpugraphs/model/row_product.h).
//
// Layout of the work: rows go kRowBlock at a time, then one at a time; within a group of rows the
// columns go in tiles of kTilePackets packets, then single packets, then single scalars. Every
// output element is the same chain over p = 0..K-1 whichever of these paths it takes: the
// packet lanes and the scalar tail both fuse the multiply-add (RowFma), and each accumulator
// starts at zero and sees the p in order.
#include "tpugraphs/model/row_product.h"

#include <Eigen/Core>

namespace tpugraphs::model {
namespace {

namespace ei = Eigen::internal;

// A register tile: kRowBlock rows x kTilePackets packets of accumulators plus the B packets of
// one step stay in registers (32 vector registers with AVX-512, 16 below it). With AVX-512 a
// tile is 8 rows x 2 packets, so that a tile's columns of B ([K, 32] floats, 24 KiB at K = 192)
// stay in a 32 KiB L1 while 8 rows pass over them.
#ifdef __AVX512F__
constexpr int kTilePackets = 2;
constexpr int kRowBlock = 8;
#else
constexpr int kTilePackets = 2;
constexpr int kRowBlock = 4;
#endif

template <typename T>
using PacketOf = typename ei::packet_traits<T>::type;
template <typename T>
constexpr int kPacketSize = ei::unpacket_traits<PacketOf<T>>::size;

// R rows x NP packets of columns starting at column j.
template <typename T, int R, int NP>
inline void PacketTile(const T* A, int64_t lda, int64_t K, const T* B, int64_t ldb, T* C,
                       int64_t ldc, int64_t j, bool accumulate) {
  using P = PacketOf<T>;
  constexpr int S = kPacketSize<T>;
  P acc[R][NP];
  for (int i = 0; i < R; ++i) {
    for (int q = 0; q < NP; ++q) acc[i][q] = ei::pset1<P>(T(0));
  }
  for (int64_t p = 0; p < K; ++p) {
    const T* b = B + p * ldb + j;
    P bv[NP];
    for (int q = 0; q < NP; ++q) bv[q] = ei::ploadu<P>(b + q * S);
    for (int i = 0; i < R; ++i) {
      const P a = ei::pset1<P>(A[i * lda + p]);
      for (int q = 0; q < NP; ++q) acc[i][q] = ei::pmadd(a, bv[q], acc[i][q]);
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int q = 0; q < NP; ++q) {
      T* c = C + i * ldc + j + q * S;
      ei::pstoreu(c, accumulate ? ei::padd(ei::ploadu<P>(c), acc[i][q]) : acc[i][q]);
    }
  }
}

// R rows x the scalar columns [j, N).
template <typename T, int R>
inline void ScalarTail(const T* A, int64_t lda, int64_t K, const T* B, int64_t ldb, int64_t N,
                       T* C, int64_t ldc, int64_t j, bool accumulate) {
  for (; j < N; ++j) {
    T acc[R];
    for (int i = 0; i < R; ++i) acc[i] = T(0);
    for (int64_t p = 0; p < K; ++p) {
      const T b = B[p * ldb + j];
      for (int i = 0; i < R; ++i) acc[i] = RowFma(A[i * lda + p], b, acc[i]);
    }
    for (int i = 0; i < R; ++i) {
      T& c = C[i * ldc + j];
      c = accumulate ? c + acc[i] : acc[i];
    }
  }
}

template <typename T, int R>
inline void RowGroup(const T* A, int64_t lda, int64_t K, const T* B, int64_t ldb, int64_t N, T* C,
                     int64_t ldc, bool accumulate) {
  constexpr int S = kPacketSize<T>;
  int64_t j = 0;
  if constexpr (S > 1) {
    for (; j + kTilePackets * S <= N; j += kTilePackets * S) {
      PacketTile<T, R, kTilePackets>(A, lda, K, B, ldb, C, ldc, j, accumulate);
    }
    for (; j + S <= N; j += S) PacketTile<T, R, 1>(A, lda, K, B, ldb, C, ldc, j, accumulate);
  }
  ScalarTail<T, R>(A, lda, K, B, ldb, N, C, ldc, j, accumulate);
}

}  // namespace

template <typename T>
void RowProduct(const T* A, int64_t rows, int64_t K, int64_t lda, const T* B, int64_t N,
                int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  int64_t r = 0;
  for (; r + kRowBlock <= rows; r += kRowBlock) {
    RowGroup<T, kRowBlock>(A + r * lda, lda, K, B, ldb, N, C + r * ldc, ldc, accumulate);
  }
  for (; r < rows; ++r) RowGroup<T, 1>(A + r * lda, lda, K, B, ldb, N, C + r * ldc, ldc, accumulate);
}

template <typename T>
void RowProductReference(const T* A, int64_t rows, int64_t K, int64_t lda, const T* B, int64_t N,
                         int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < N; ++j) {
      T acc = T(0);
      for (int64_t p = 0; p < K; ++p) acc = RowFma(A[r * lda + p], B[p * ldb + j], acc);
      T& c = C[r * ldc + j];
      c = accumulate ? c + acc : acc;
    }
  }
}

template void RowProduct<float>(const float*, int64_t, int64_t, int64_t, const float*, int64_t,
                                int64_t, float*, int64_t, bool);
template void RowProduct<double>(const double*, int64_t, int64_t, int64_t, const double*, int64_t,
                                 int64_t, double*, int64_t, bool);
template void RowProductReference<float>(const float*, int64_t, int64_t, int64_t, const float*,
                                         int64_t, int64_t, float*, int64_t, bool);
template void RowProductReference<double>(const double*, int64_t, int64_t, int64_t, const double*,
                                          int64_t, int64_t, double*, int64_t, bool);

}  // namespace tpugraphs::model
