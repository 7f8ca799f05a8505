#include "tpugraphs/eval/eval_indices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "testing/test_util.h"

namespace tpugraphs::eval {
namespace {

TEST(EvalIndicesTest, RealFilesHaveTheDocumentedShape) {
  auto loaded = EvalIndices::Load(testing::RealDataPath("eval_indices"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const EvalIndices& idx = *loaded;
  EXPECT_EQ(idx.collections(),
            (std::vector<std::string>{"layout:nlp:default", "layout:nlp:random",
                                      "layout:xla:default", "layout:xla:random"}));
  // baselines.md 6.2: 7 xla and 20 nlp validation graphs, 1000 indices each, largest indices
  // 18993 / 19221 / 100024 / 100031.
  const std::pair<const char*, std::pair<size_t, int64_t>> expected[] = {
      {"layout:xla:random", {7, 18993}},
      {"layout:xla:default", {7, 19221}},
      {"layout:nlp:random", {20, 100024}},
      {"layout:nlp:default", {20, 100031}},
  };
  for (const auto& [collection, want] : expected) {
    const IndexLists* lists = idx.Lists(collection);
    ASSERT_NE(lists, nullptr) << collection;
    EXPECT_EQ(lists->size(), want.first) << collection;
    int64_t max_index = -1;
    for (const auto& [name, v] : *lists) {
      EXPECT_EQ(v.size(), 1000u) << collection << " " << name;
      max_index = std::max(max_index, *std::max_element(v.begin(), v.end()));
    }
    EXPECT_EQ(max_index, want.second) << collection;
  }
  // unet_3d.4x4.bf16 of xla_random lists only 481 distinct configs (0..480), so it repeats.
  const std::vector<int64_t>* unet = idx.Find("layout:xla:random", "unet_3d.4x4.bf16");
  ASSERT_NE(unet, nullptr);
  EXPECT_EQ(unet->size(), 1000u);
  EXPECT_EQ(std::set<int64_t>(unet->begin(), unet->end()).size(), 481u);
  EXPECT_EQ(*std::max_element(unet->begin(), unet->end()), 480);
  // The first entries of xla_random's first graph, as in the file.
  const std::vector<int64_t>* bert = idx.Find("layout:xla:random", "bert_pretraining.4x4.fp16");
  ASSERT_NE(bert, nullptr);
  EXPECT_EQ((std::vector<int64_t>(bert->begin(), bert->begin() + 4)),
            (std::vector<int64_t>{4786, 14036, 11399, 11998}));
  EXPECT_EQ(idx.Find("layout:xla:random", "no_such_graph"), nullptr);
  EXPECT_EQ(idx.Find("tile:xla", "x"), nullptr);
  EXPECT_TRUE(idx.Covers("layout:nlp:default"));
  EXPECT_FALSE(idx.Covers("layout:synth:random"));
}

TEST(EvalIndicesTest, LoadsOneFile) {
  auto loaded = EvalIndices::Load(testing::RealDataPath("eval_indices/xla_default.json"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->collections(), std::vector<std::string>{"layout:xla:default"});
}

TEST(EvalIndicesTest, ParsesEscapesAndEmptyLists) {
  auto r = ParseEvalIndexJson(" \n{\"a\\\"b\": [ ], \"c\\u0041\" :[0,1 ,\n2]}\n", "t.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->at("a\"b"), std::vector<int64_t>{});
  EXPECT_EQ(r->at("cA"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(ParseEvalIndexJson("{}", "t.json").ok());
}

TEST(EvalIndicesTest, MalformedJsonNamesFileLineAndColumn) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"", "t.json:1:1: malformed eval-index JSON: expected '{'"},
      {"{\"a\": [1, 2,]}", "t.json:1:13: malformed eval-index JSON: expected a config index"},
      {"{\"a\": [1, 2]", "t.json:1:13: malformed eval-index JSON: expected ',' or '}'"},
      {"{\"a\": [1.5]}", "not an integer"},
      {"{\"a\": [-1]}", "negative config index"},
      {"{\"a\": [1],\n \"a\": [2]}", "t.json:2:2: malformed eval-index JSON: duplicate graph name"},
      {"{\"a\": {\"b\": 1}}", "expected '[' starting the index list"},
      {"{\"a\": [1]} x", "unexpected text after the top-level object"},
      {"{\"a: [1]}", "unterminated string"},
      {"{a: [1]}", "expected a string key"},
      {"{\"a\": [99999999999999999999]}", "too large"},
      {"{\"a\": [01]}", "leading zero"},
  };
  for (const Case& c : cases) {
    auto r = ParseEvalIndexJson(c.text, "t.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << c.text << " -> " << r.status().message();
  }
}

TEST(EvalIndicesTest, FileNamesMapToCollections) {
  EXPECT_EQ(*CollectionOfIndexFile("/x/y/nlp_default.json"), "layout:nlp:default");
  EXPECT_FALSE(CollectionOfIndexFile("/x/indices.json").ok());
  EXPECT_FALSE(CollectionOfIndexFile("/x/xla_random.txt").ok());

  testing::TempDir tmp;
  std::ofstream(tmp.File("xla_random.json")) << "{\"g\": [1, 2";
  auto r = EvalIndices::Load(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(tmp.File("xla_random.json") + ":1:"), std::string::npos)
      << r.status().message();
  testing::TempDir empty;
  EXPECT_FALSE(EvalIndices::Load(empty.path()).ok());
  EXPECT_FALSE(EvalIndices::Load(tmp.File("missing_file.json")).ok());
}

}  // namespace
}  // namespace tpugraphs::eval
