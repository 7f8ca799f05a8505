// Field-by-field equality of two graphs, for tests that check a graph survives a round trip or
// two code paths build the same one.
#ifndef TPUGRAPHS_TESTS_TESTING_GRAPH_COMPARE_H_
#define TPUGRAPHS_TESTS_TESTING_GRAPH_COMPARE_H_

#include <gtest/gtest.h>

#include "tpugraphs/common/graph.h"

namespace tpugraphs::testing {

// Every field of two graphs is equal (floats compared with ==).
inline void ExpectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.collection, b.collection);
  EXPECT_EQ(a.split, b.split);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.node_opcode, b.node_opcode);
  EXPECT_EQ(a.node_feat, b.node_feat);
  EXPECT_EQ(a.edge_index, b.edge_index);
  EXPECT_EQ(a.node_splits, b.node_splits);
  EXPECT_EQ(a.num_configs, b.num_configs);
  EXPECT_EQ(a.config_runtime, b.config_runtime);
  EXPECT_EQ(a.config_runtime_normalizers, b.config_runtime_normalizers);
  EXPECT_EQ(a.config_feat, b.config_feat);
  EXPECT_EQ(a.node_config_ids, b.node_config_ids);
  EXPECT_EQ(a.node_config_feat, b.node_config_feat);
  EXPECT_EQ(a.config_node_names, b.config_node_names);
}

}  // namespace tpugraphs::testing

#endif  // TPUGRAPHS_TESTS_TESTING_GRAPH_COMPARE_H_
