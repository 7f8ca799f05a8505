// The one table of feature names: the 140 node features, 24 tile config features and 18 layout
// config features of the TpuGraphs release, in column order. The names are the release's
// (tpu_graphs README, "Node Features"); the featurizer (node_features.h) writes the columns in
// exactly this order, and docs/features.md is generated from this table
// (tools/dev/gen-features-doc.sh; a unit test fails when the page is stale).
//
// Thread-safety: read-only tables.
#ifndef TPUGRAPHS_INGEST_FEATURE_NAMES_H_
#define TPUGRAPHS_INGEST_FEATURE_NAMES_H_

#include <string>
#include <string_view>
#include <vector>

namespace tpugraphs::ingest {

// How a group of columns is computed from one proto list or scalar (ingest-spec section 3.1).
enum class FeatureEncoding {
  kScalar,    // one value
  kOneHot,    // one column per listed case
  kSeq,       // first L values (zero padded), sum of all, product of all
  kSeqNoAgg,  // first L values (zero padded)
  kBools,     // first L flags, count of true, count of false
};

struct FeatureGroup {
  int first;              // first column
  int width;              // number of columns
  std::string_view stem;  // column names are stem + suffix ("window_size" -> "window_size_0")
  FeatureEncoding encoding;
  std::string_view source;  // the proto field(s) read
  std::string_view notes;   // what a reader should know
};

// Groups in column order; together they cover every column once.
const std::vector<FeatureGroup>& NodeFeatureGroups();
const std::vector<FeatureGroup>& TileConfigFeatureGroups();
const std::vector<FeatureGroup>& LayoutConfigFeatureGroups();

// Column names expanded from the groups: 140, 24 and 18 names.
const std::vector<std::string>& NodeFeatureNames();
const std::vector<std::string>& TileConfigFeatureNames();
const std::vector<std::string>& LayoutConfigFeatureNames();

// The text of docs/features.md.
std::string FeaturesMarkdown();

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_FEATURE_NAMES_H_
