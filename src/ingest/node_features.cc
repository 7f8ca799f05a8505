#include "tpugraphs/ingest/node_features.h"

#include <algorithm>
#include <initializer_list>
#include <limits>

#include "tpugraphs/common/graph.h"

namespace tpugraphs::ingest {
namespace {

// int64 arithmetic with two's-complement wrap-around, done in uint64 so it is defined behaviour
// and gives the bits the release's (overflowing) int64 code produced.
int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t WrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// The single int64 -> float32 conversion (round to nearest even; never through double).
float F(int64_t v) { return static_cast<float>(v); }

// Writes fixed-size features and advances the cursor.
class Writer {
 public:
  explicit Writer(float* out) : out_(out) {}

  void Scalar(int64_t v) { *out_++ = F(v); }
  void Bool(bool b) { *out_++ = b ? 1.0f : 0.0f; }

  // First min(L, n) values zero padded to L, then the sum and product of all n values.
  template <typename Get>
  void Seq(int len, int n, Get get, bool zero_product_on_empty = false) {
    int64_t sum = 0, product = 1;
    for (int i = 0; i < n; ++i) {
      const int64_t v = get(i);
      sum = WrapAdd(sum, v);
      product = WrapMul(product, v);
    }
    if (n == 0 && zero_product_on_empty) product = 0;
    SeqNoAgg(len, n, get);
    *out_++ = F(sum);
    *out_++ = F(product);
  }

  template <typename Get>
  void SeqNoAgg(int len, int n, Get get) {
    for (int i = 0; i < len; ++i) *out_++ = i < n ? F(get(i)) : 0.0f;
  }

  template <typename Get>
  void Bools(int len, int n, Get get) {
    int64_t num_true = 0;
    for (int i = 0; i < n; ++i) num_true += get(i) ? 1 : 0;
    for (int i = 0; i < len; ++i) *out_++ = (i < n && get(i)) ? 1.0f : 0.0f;
    *out_++ = F(num_true);
    *out_++ = F(n - num_true);
  }

  // A repeated int64 proto field.
  template <typename R>
  void SeqOf(int len, const R& r, bool zero_product_on_empty = false) {
    Seq(
        len, r.size(), [&](int i) { return static_cast<int64_t>(r.Get(i)); },
        zero_product_on_empty);
  }
  template <typename R>
  void SeqNoAggOf(int len, const R& r) {
    SeqNoAgg(len, r.size(), [&](int i) { return static_cast<int64_t>(r.Get(i)); });
  }

  float* cursor() const { return out_; }

 private:
  float* out_;
};

// Slot of each PrimitiveType value 0..18 in the one-hot (ingest-spec 3.2 / quirk 3).
constexpr int kElementTypeSlot[19] = {0,  1,  2,  3,  4,  5,  6,  7,  8, 9,
                                      10, 11, 12, 16, 17, 14, 13, 18, 15};

}  // namespace

void FeaturizeInstruction(const xla::HloInstructionProto& inst, bool is_root, float* out) {
  Writer w(out);
  w.Bool(is_root);  // 0
  w.Scalar(0);      // 1: element_size_in_bits is a literal 0 in the release.

  // 2-20: element type one-hot.
  float* onehot = w.cursor();
  for (int i = 0; i < 19; ++i) w.Scalar(0);
  const int type = static_cast<int>(inst.shape().element_type());
  if (type >= 0 && type < 19) onehot[kElementTypeSlot[type]] = 1.0f;

  const xla::ShapeProto& shape = inst.shape();
  w.SeqOf(6, shape.dimensions());       // 21-28
  w.Scalar(shape.tuple_shapes_size());  // 29
  w.Scalar(inst.parameter_number());    // 30
  w.SeqNoAggOf(6, inst.dimensions());   // 31-36

  const auto& wd = inst.window().dimensions();
  const int nw = wd.size();
  w.Seq(6, nw, [&](int i) { return wd.Get(i).size(); });               // 37-44
  w.Seq(6, nw, [&](int i) { return wd.Get(i).stride(); });             // 45-52
  w.Seq(6, nw, [&](int i) { return wd.Get(i).padding_low(); });        // 53-60
  w.Seq(6, nw, [&](int i) { return wd.Get(i).padding_high(); });       // 61-68
  w.Seq(6, nw, [&](int i) { return wd.Get(i).window_dilation(); });    // 69-76
  w.Seq(6, nw, [&](int i) { return wd.Get(i).base_dilation(); });      // 77-84
  w.Bools(6, nw, [&](int i) { return wd.Get(i).window_reversal(); });  // 85-92

  const xla::ConvolutionDimensionNumbers& cdn = inst.convolution_dimension_numbers();
  w.Scalar(cdn.input_batch_dimension());             // 93
  w.Scalar(cdn.input_feature_dimension());           // 94
  w.SeqNoAggOf(4, cdn.input_spatial_dimensions());   // 95-98
  w.Scalar(cdn.kernel_input_feature_dimension());    // 99
  w.Scalar(cdn.kernel_output_feature_dimension());   // 100
  w.SeqNoAggOf(4, cdn.kernel_spatial_dimensions());  // 101-104
  w.Scalar(cdn.output_batch_dimension());            // 105
  w.Scalar(cdn.output_feature_dimension());          // 106
  w.Scalar(inst.feature_group_count());              // 107
  w.Scalar(inst.batch_group_count());                // 108

  const auto& sd = inst.slice_dimensions();
  const int ns = sd.size();
  w.Seq(2, ns, [&](int i) { return sd.Get(i).start(); });   // 109-112
  w.Seq(2, ns, [&](int i) { return sd.Get(i).stride(); });  // 113-116
  w.Seq(2, ns, [&](int i) { return sd.Get(i).limit(); });   // 117-120
  w.SeqOf(2, inst.dynamic_slice_sizes());                   // 121-124

  const auto& pd = inst.padding_config().dimensions();
  const int np = pd.size();
  w.Seq(2, np, [&](int i) { return pd.Get(i).edge_padding_low(); });   // 125-128
  w.Seq(2, np, [&](int i) { return pd.Get(i).edge_padding_high(); });  // 129-132
  w.Bool(inst.is_stable());                                            // 133
  w.SeqNoAggOf(6, shape.layout().minor_to_major());                    // 134-139
}

void FeaturizeTileConfig(const tpu_graphs::TileSizeConfig& config, float* out) {
  Writer w(out);
  w.SeqOf(6, config.kernel_bounds(), /*zero_product_on_empty=*/true);
  w.SeqOf(6, config.output_bounds(), true);
  w.SeqOf(6, config.input_bounds(), true);
}

void FeaturizeTileBounds(const std::vector<int64_t>& kernel_bounds,
                         const std::vector<int64_t>& output_bounds,
                         const std::vector<int64_t>& input_bounds, float* out) {
  Writer w(out);
  for (const std::vector<int64_t>* bounds : {&kernel_bounds, &output_bounds, &input_bounds}) {
    const int n = static_cast<int>(bounds->size());
    w.Seq(
        6, n, [&](int i) { return (*bounds)[static_cast<size_t>(i)]; }, true);
  }
}

Status FeaturizeLayoutNode(const tpu_graphs::LayoutConfig::NodeLayoutConfig& node,
                           const std::string& what, int8_t* out) {
  constexpr int kTensors = 3, kDims = 6;
  static_assert(kTensors * kDims == kLayoutConfigFeatureCount);
  if (node.tensors_size() > kTensors) {
    return InvalidArgumentError(what + ": layout config has " +
                                std::to_string(node.tensors_size()) +
                                " tensors; at most 3 (output, input, kernel) are supported");
  }
  std::fill(out, out + kLayoutConfigFeatureCount, int8_t{-1});
  for (int t = 0; t < node.tensors_size(); ++t) {
    const auto& dims = node.tensors(t).dims();
    const int n = std::min(kDims, dims.size());
    for (int i = 0; i < n; ++i) {
      const int32_t v = dims.Get(i);
      if (v < std::numeric_limits<int8_t>::min() || v > std::numeric_limits<int8_t>::max()) {
        return InvalidArgumentError(what + ": layout dimension value " + std::to_string(v) +
                                    " in tensor " + std::to_string(t) +
                                    " does not fit a signed byte (expected a small dimension "
                                    "index)");
      }
      out[t * kDims + i] = static_cast<int8_t>(v);
    }
  }
  return Status::Ok();
}

}  // namespace tpugraphs::ingest
