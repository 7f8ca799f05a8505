// FNV-1a (common/hash.h) against the published 64-bit test vectors, and the equivalences the
// callers rely on: a string hashes as its bytes, and hashing continues across pieces; WordHash,
// the in-memory key, sees every byte and the length.
#include "tpugraphs/common/hash.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>
#include <vector>

#include "tpugraphs/common/json_util.h"

namespace tpugraphs {
namespace {

TEST(HashTest, Fnv1aMatchesThePublishedVectors) {
  // Test vectors of the FNV reference (isthe.com/chongo/tech/comp/fnv, 64-bit FNV-1a), with
  // the published offset basis.
  const uint64_t basis = kFnv1aPublishedOffsetBasis;
  EXPECT_EQ(Fnv1a(std::string_view(""), basis), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a(std::string_view("a"), basis), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a(std::string_view("foobar"), basis), 0x85944171f73967e8ULL);
}

// The project's basis, on which stored fingerprints and every derived seed depend.
TEST(HashTest, TheProjectsBasisIsKept) {
  EXPECT_EQ(Fnv1a(std::string_view("")), 1469598103934665603ULL);
  EXPECT_EQ(Fnv1a(std::string_view("a")),
            (1469598103934665603ULL ^ static_cast<unsigned char>('a')) * 1099511628211ULL);
}

TEST(HashTest, PiecesContinueTheHash) {
  const std::string s = "layout:xla:random:graph_7\n";
  EXPECT_EQ(Fnv1a(s), Fnv1a(s.substr(9), Fnv1a(s.substr(0, 9))));
  EXPECT_EQ(Fnv1a(s), Fnv1a(s.data(), s.size()));
  uint64_t h = kFnv1aOffsetBasis;
  for (unsigned char c : s) h = Fnv1aStep(h, c);
  EXPECT_EQ(h, Fnv1a(s));
}

// WordHash, the in-memory key: equal bytes give equal keys; one changed byte anywhere in a
// configuration-sized input (every position of an 8-byte word, and the zero-padded tail), or one
// byte more, gives another; an empty input may come with no data pointer.
TEST(HashTest, WordHashSeesEveryByteAndTheLength) {
  std::vector<unsigned char> bytes(5403);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 31 + 7);
  const uint64_t h = WordHash(bytes.data(), bytes.size());
  EXPECT_EQ(h, WordHash(std::vector<unsigned char>(bytes).data(), bytes.size()));
  std::set<uint64_t> keys = {h};
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<unsigned char> changed = bytes;
    changed[i] ^= 0x80;  // the top bit of the byte: in a word's top byte, the hardest to mix
    keys.insert(WordHash(changed.data(), changed.size()));
  }
  EXPECT_EQ(keys.size(), bytes.size() + 1);
  std::vector<unsigned char> longer = bytes;
  longer.push_back(0);  // a zero byte more: the padding alone would not tell them apart
  EXPECT_NE(WordHash(longer.data(), longer.size()), h);
  EXPECT_EQ(WordHash(nullptr, 0), WordHash(nullptr, 0, kFnv1aOffsetBasis));
  EXPECT_NE(WordHash(nullptr, 0, h), h);  // an empty piece still moves a continued key
}

TEST(JsonNumberTest, SignificantDigitsAndNonFiniteAsNull) {
  EXPECT_EQ(JsonNumber(0.1), "0.10000000000000001");
  EXPECT_EQ(JsonNumber(0.1, 9), "0.1");
  EXPECT_EQ(JsonNumber(1.0 / 3.0, 9), "0.333333333");
  EXPECT_EQ(JsonNumber(2.5e-7, 9), "2.5e-07");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::infinity(), 9), "null");
}

}  // namespace
}  // namespace tpugraphs
