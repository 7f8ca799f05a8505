#include "tpugraphs/io/graph_filter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tpugraphs::io {
namespace {

std::vector<GraphKey> Keys() {
  return {{"tile:xla", "train", "a"},
          {"tile:xla", "valid", "b"},
          {"layout:xla:random", "train", "c"},
          {"layout:xla:random", "test", "d"}};
}

// The rule written out by hand: every list empty or holding the value.
bool BruteMatch(const GraphFilter& f, const GraphKey& k) {
  auto in = [](const std::vector<std::string>& l, std::string_view v) {
    if (l.empty()) return true;
    for (const auto& x : l) {
      if (x == v) return true;
    }
    return false;
  };
  return in(f.collections, k.collection) && in(f.splits, k.split) && in(f.names, k.name);
}

TEST(GraphFilterTest, ChoosesWhatEveryListAllowsInOrder) {
  const std::vector<GraphFilter> filters = {
      {},
      {{"tile:xla"}, {}, {}},
      {{}, {"train"}, {}},
      {{"tile:xla", "layout:xla:random"}, {"train", "test"}, {}},
      {{}, {}, {"d", "a"}},
  };
  for (const GraphFilter& f : filters) {
    auto chosen = SelectGraphs("src", Keys(), f);
    ASSERT_TRUE(chosen.ok()) << f.Describe() << ": " << chosen.status().message();
    std::vector<int64_t> expected;
    for (int64_t i = 0; i < 4; ++i) {
      if (BruteMatch(f, Keys()[i])) expected.push_back(i);
    }
    EXPECT_EQ(*chosen, expected) << f.Describe();
  }
}

TEST(GraphFilterTest, NothingChosenIsOneCodedMessage) {
  GraphFilter f;
  f.splits = {"valid"};
  f.names = {"a"};
  auto r = SelectGraphs("data.tpug", Keys(), f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNoMatchingGraphs);
  EXPECT_EQ(r.status().message(),
            "data.tpug: no graph matches split valid; graph a (4 graphs; collections: "
            "layout:xla:random, tile:xla)");
}

TEST(GraphFilterTest, AMisspeltCollectionFailsEvenBesideAMatchingOne) {
  GraphFilter f;
  f.collections = {"tile:xla", "tile:xl"};
  auto r = SelectGraphs("data.tpug", Keys(), f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNoMatchingGraphs);
  EXPECT_NE(r.status().message().find("data.tpug: no graph matches collection tile:xl ("),
            std::string::npos)
      << r.status().message();
}

TEST(GraphFilterTest, TheCallersConditionCountsAsTheSelection) {
  auto r = SelectGraphs("src", Keys(), GraphFilter{}, [](int64_t i) { return i % 2 == 1; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int64_t>{1, 3}));
  auto none = SelectGraphs("src", Keys(), GraphFilter{}, [](int64_t) { return false; });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNoMatchingGraphs);
  EXPECT_NE(none.status().message().find("src: no graph matches the selection"), std::string::npos);
  // No candidates at all.
  auto empty = SelectGraphs("empty.tpug", {}, GraphFilter{});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "empty.tpug: no graph matches the selection (0 graphs)");
}

}  // namespace
}  // namespace tpugraphs::io
