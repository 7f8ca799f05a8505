#include "tpugraphs/model/feature_transform.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tpugraphs::model {

double SignedLog(double x) { return x < 0 ? -std::log1p(-x) : std::log1p(x); }

FeatureTransform::FeatureTransform()
    : node_stats_(kNodeFeatureCount), config_stats_(kTileConfigFeatureCount) {}

void FeatureTransform::AddValue(ColumnStats& s, double x) {
  if (!std::isfinite(x)) return;
  if (s.count == 0) {
    s.min = s.max = x;
  } else {
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  const double y = SignedLog(x);
  // Shifted sums (shift = first value) keep the variance accurate when |mean| >> std.
  if (!s.has_shift) {
    s.shift = y;
    s.has_shift = true;
  }
  const double d = y - s.shift;
  s.sum += d;
  s.sum_sq += d * d;
  ++s.count;
}

void FeatureTransform::Accumulate(const Graph& g) {
  finalized_ = false;
  if (g.absent_dimensions_marked) {
    if (marked_graphs_++ == 0) a_marked_graph_ = g.Id();
  } else {
    if (official_graphs_++ == 0) an_official_graph_ = g.Id();
  }
  const int64_t n = g.num_nodes();
  if (static_cast<int64_t>(g.node_feat.size()) == n * kNodeFeatureCount) {
    for (int64_t i = 0; i < n; ++i) {
      const float* row = g.node_feat.data() + i * kNodeFeatureCount;
      for (int j = 0; j < kNodeFeatureCount; ++j) AddValue(node_stats_[j], row[j]);
    }
    num_node_rows_ += n;
  }
  if (g.is_tile() &&
      static_cast<int64_t>(g.config_feat.size()) == g.num_configs * kTileConfigFeatureCount) {
    for (int64_t i = 0; i < g.num_configs; ++i) {
      const float* row = g.config_feat.data() + i * kTileConfigFeatureCount;
      for (int j = 0; j < kTileConfigFeatureCount; ++j) AddValue(config_stats_[j], row[j]);
    }
    num_config_rows_ += g.num_configs;
  }
  ++num_graphs_;
}

void FeatureTransform::FinalizeColumns(const std::vector<ColumnStats>& stats,
                                       std::vector<int>& kept, std::vector<double>& mean,
                                       std::vector<double>& inv_std, std::vector<double>& sd) {
  kept.clear();
  mean.clear();
  inv_std.clear();
  sd.clear();
  for (size_t j = 0; j < stats.size(); ++j) {
    const ColumnStats& s = stats[j];
    if (s.count == 0 || s.min == s.max) continue;  // constant over the training split: dropped
    const double m = s.sum / s.count;
    const double var = std::max(0.0, s.sum_sq / s.count - m * m);
    // Non-constant raw columns have var > 0 in slog space unless rounding hides it; floor it.
    const double stdev = std::max(std::sqrt(var), 1e-6);
    kept.push_back(static_cast<int>(j));
    mean.push_back(m + s.shift);
    sd.push_back(stdev);
    inv_std.push_back(1.0 / stdev);
  }
}

Status FeatureTransform::Finalize() {
  if (num_node_rows_ == 0) {
    return FailedPreconditionError(
        "feature transform: no node feature rows were accumulated (empty training split?)");
  }
  if (marked_graphs_ > 0 && official_graphs_ > 0) {
    return InvalidArgumentError(
        "the training graphs mix node features with absent dimensions marked -1 (" +
        std::to_string(marked_graphs_) + " graphs, e.g. " + a_marked_graph_ +
        ") and the official features (" + std::to_string(official_graphs_) + ", e.g. " +
        an_official_graph_ +
        "); ingest them all with or all without --mark-absent-dimensions (docs/ingest.md)");
  }
  absent_marked_ = marked_graphs_ > 0;
  FinalizeColumns(node_stats_, kept_node_, node_mean_, node_inv_std_, node_std_);
  FinalizeColumns(config_stats_, kept_config_, config_mean_, config_inv_std_, config_std_);
  node_pos_.assign(kNodeFeatureCount, -1);
  for (size_t j = 0; j < kept_node_.size(); ++j) node_pos_[kept_node_[j]] = static_cast<int>(j);
  finalized_ = true;
  return Status::Ok();
}

void FeatureTransform::ApplyNodeFeatures(const float* node_feat, int64_t n, float* out) const {
  const int kept = kept_node_columns();
  for (int64_t i = 0; i < n; ++i) {
    const float* row = node_feat + i * kNodeFeatureCount;
    float* o = out + i * kept;
    for (int j = 0; j < kept; ++j) {
      const double x = row[kept_node_[j]];
      o[j] = static_cast<float>((SignedLog(x) - node_mean_[j]) * node_inv_std_[j]);
    }
  }
}

void FeatureTransform::ApplyConfigFeatures(const float* config_feat, int64_t k, float* out) const {
  const int kept = kept_config_columns();
  for (int64_t i = 0; i < k; ++i) {
    const float* row = config_feat + i * kTileConfigFeatureCount;
    float* o = out + i * kept;
    for (int j = 0; j < kept; ++j) {
      const double x = row[kept_config_[j]];
      o[j] = static_cast<float>((SignedLog(x) - config_mean_[j]) * config_inv_std_[j]);
    }
  }
}

double FeatureTransform::TransformNodeValue(int raw_column, double x) const {
  const int j = node_pos_[raw_column];
  return (SignedLog(x) - node_mean_[j]) * node_inv_std_[j];
}

Status FeatureTransform::CheckGraph(const Graph& g) const {
  if (g.absent_dimensions_marked == absent_marked_) return Status::Ok();
  const char* marked =
      "node features with absent dimensions marked -1 (ingest --mark-absent-dimensions)";
  const char* official = "the official node features (absent dimensions 0)";
  return InvalidArgumentError(
      "graph " + g.name + ": has " + (g.absent_dimensions_marked ? marked : official) +
      " but the model was trained on " + (absent_marked_ ? marked : official) +
      "; ingest it the way the training data was ingested");
}

void FeatureTransform::ToProto(FeatureTransformProto* p) const {
  p->Clear();
  if (absent_marked_) p->set_absent_dimensions_marked(true);
  p->set_node_columns(kNodeFeatureCount);
  p->set_config_columns(kTileConfigFeatureCount);
  for (size_t j = 0; j < kept_node_.size(); ++j) {
    p->add_kept_node_columns(kept_node_[j]);
    p->add_node_mean(node_mean_[j]);
    p->add_node_std(node_std_[j]);
  }
  for (size_t j = 0; j < kept_config_.size(); ++j) {
    p->add_kept_config_columns(kept_config_[j]);
    p->add_config_mean(config_mean_[j]);
    p->add_config_std(config_std_[j]);
  }
  p->set_num_graphs(num_graphs_);
  p->set_num_node_rows(num_node_rows_);
  p->set_num_config_rows(num_config_rows_);
}

namespace {

Status ReadColumns(const char* what, int width, int expected_width,
                   const google::protobuf::RepeatedField<int32_t>& cols,
                   const google::protobuf::RepeatedField<double>& mean,
                   const google::protobuf::RepeatedField<double>& sd, std::vector<int>& kept,
                   std::vector<double>& mean_out, std::vector<double>& sd_out,
                   std::vector<double>& inv_out) {
  const std::string w(what);
  if (width != expected_width && !(width == 0 && cols.empty())) {
    return InvalidArgumentError("feature transform: " + w + " width is " + std::to_string(width) +
                                ", expected " + std::to_string(expected_width));
  }
  if (mean.size() != cols.size() || sd.size() != cols.size()) {
    return InvalidArgumentError("feature transform: " + w +
                                " statistics do not have one entry per kept column");
  }
  kept.clear();
  mean_out.clear();
  sd_out.clear();
  inv_out.clear();
  int prev = -1;
  for (int j = 0; j < cols.size(); ++j) {
    if (cols[j] <= prev || cols[j] >= expected_width) {
      return InvalidArgumentError("feature transform: " + w + " kept column " +
                                  std::to_string(cols[j]) + " is out of range or not increasing");
    }
    prev = cols[j];
    if (!std::isfinite(mean[j]) || !std::isfinite(sd[j]) || !(sd[j] > 0)) {
      return InvalidArgumentError("feature transform: " + w + " column " + std::to_string(cols[j]) +
                                  " has a non-finite mean or std <= 0");
    }
    kept.push_back(cols[j]);
    mean_out.push_back(mean[j]);
    sd_out.push_back(sd[j]);
    inv_out.push_back(1.0 / sd[j]);
  }
  return Status::Ok();
}

}  // namespace

Status FeatureTransform::FromProto(const FeatureTransformProto& p) {
  finalized_ = false;
  TPUG_RETURN_IF_ERROR(ReadColumns("node feature", p.node_columns(), kNodeFeatureCount,
                                   p.kept_node_columns(), p.node_mean(), p.node_std(), kept_node_,
                                   node_mean_, node_std_, node_inv_std_));
  TPUG_RETURN_IF_ERROR(ReadColumns("config feature", p.config_columns(), kTileConfigFeatureCount,
                                   p.kept_config_columns(), p.config_mean(), p.config_std(),
                                   kept_config_, config_mean_, config_std_, config_inv_std_));
  num_graphs_ = p.num_graphs();
  absent_marked_ = p.absent_dimensions_marked();
  num_node_rows_ = p.num_node_rows();
  num_config_rows_ = p.num_config_rows();
  node_pos_.assign(kNodeFeatureCount, -1);
  for (size_t j = 0; j < kept_node_.size(); ++j) node_pos_[kept_node_[j]] = static_cast<int>(j);
  finalized_ = true;
  return Status::Ok();
}

}  // namespace tpugraphs::model
