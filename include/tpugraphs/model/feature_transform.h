// FeatureTransform: how raw node features (and tile config features) become model inputs.
//
// Per column: slog(x) = sign(x) * log1p(|x|), then standardised with the mean and standard
// deviation of slog(x) over the training split. Columns whose raw value is constant over the
// training split are dropped (docs/model.md, "Feature transform"). The statistics are saved in
// the model file (FeatureTransformProto) so evaluation applies exactly the training transform.
//
// Usage: Accumulate(g) for every training graph, then Finalize(); then Apply*.
// Thread-safety: Accumulate/Finalize/FromProto mutate; the const methods may run concurrently.
#ifndef TPUGRAPHS_MODEL_FEATURE_TRANSFORM_H_
#define TPUGRAPHS_MODEL_FEATURE_TRANSFORM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/model.pb.h"

namespace tpugraphs::model {

// sign(x) * log1p(|x|).
double SignedLog(double x);

class FeatureTransform {
 public:
  FeatureTransform();

  // Streaming fit: adds g's node feature rows (and, for tile graphs, its config_feat rows).
  // Non-finite values are ignored for the statistics.
  void Accumulate(const Graph& g);
  // Computes mean/std and the kept columns. Fails if nothing was accumulated, or if the graphs
  // mix marked and official absent dimensions (Graph::absent_dimensions_marked).
  Status Finalize();
  bool finalized() const { return finalized_; }

  int node_columns() const { return kNodeFeatureCount; }
  int config_columns() const { return kTileConfigFeatureCount; }
  int kept_node_columns() const { return static_cast<int>(kept_node_.size()); }
  int kept_config_columns() const { return static_cast<int>(kept_config_.size()); }
  // Raw column index of kept column j.
  const std::vector<int>& kept_node_column_ids() const { return kept_node_; }
  const std::vector<int>& kept_config_column_ids() const { return kept_config_; }

  // node_feat: [n, 140] raw; out: [n, kept_node_columns()]. REQUIRES: finalized().
  void ApplyNodeFeatures(const float* node_feat, int64_t n, float* out) const;
  // config_feat: [k, 24] raw tile features; out: [k, kept_config_columns()]. REQUIRES: finalized().
  void ApplyConfigFeatures(const float* config_feat, int64_t k, float* out) const;
  // Transformed value of one raw node column value (column = raw index, must be kept).
  double TransformNodeValue(int raw_column, double x) const;

  // Whether the training graphs' node features mark absent dimensions with -1
  // (ingest/absent_dimensions.h). A model applies only to graphs of the same kind.
  bool absent_dimensions_marked() const { return absent_marked_; }
  // InvalidArgument naming g if its features are of the other kind.
  Status CheckGraph(const Graph& g) const;

  void ToProto(FeatureTransformProto* p) const;
  // Validates widths, index ranges and finiteness/positivity of the statistics.
  Status FromProto(const FeatureTransformProto& p);

 private:
  struct ColumnStats {
    double sum = 0, sum_sq = 0;  // of slog(x), shifted by `shift` for accuracy
    double shift = 0;
    bool has_shift = false;
    double min = 0, max = 0;  // raw
    int64_t count = 0;
  };
  static void AddValue(ColumnStats& s, double x);
  static void FinalizeColumns(const std::vector<ColumnStats>& stats, std::vector<int>& kept,
                              std::vector<double>& mean, std::vector<double>& inv_std,
                              std::vector<double>& std);

  std::vector<ColumnStats> node_stats_, config_stats_;
  int64_t num_graphs_ = 0, num_node_rows_ = 0, num_config_rows_ = 0;
  bool finalized_ = false;
  bool absent_marked_ = false;
  int64_t marked_graphs_ = 0, official_graphs_ = 0;
  std::string a_marked_graph_, an_official_graph_;  // one of each, for the error message
  std::vector<int> kept_node_, kept_config_;
  std::vector<int> node_pos_;  // raw column -> kept index or -1
  std::vector<double> node_mean_, node_std_, node_inv_std_;
  std::vector<double> config_mean_, config_std_, config_inv_std_;
};

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_FEATURE_TRANSFORM_H_
