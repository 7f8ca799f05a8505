// The fixed-order collectives of distributed::Communicator on in-process groups (ranks are
// threads), the single-process group, and BalanceByCost. The MPI implementation runs the same
// algorithms over MPI_Alltoallv/MPI_Allgatherv: tests/mpi/ drives it through mpirun.
#include "tpugraphs/distributed/communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tpugraphs/common/rng.h"

namespace tpugraphs::distributed {
namespace {

// Runs fn(comm) on every rank of a local group of `size` threads.
void OnGroup(int size, const std::function<void(Communicator&)>& fn) {
  auto group = MakeLocalGroup(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { fn(*group[r]); });
  for (auto& t : threads) t.join();
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Items of very different magnitudes, so that the order of a float sum shows in its bits.
std::vector<std::vector<float>> MakeItems(int count, int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<float>> items(count, std::vector<float>(n));
  for (auto& item : items) {
    const double scale = std::pow(10.0, rng.Uniform() * 8 - 4);
    for (float& x : item) x = static_cast<float>((rng.Uniform() - 0.5) * scale);
  }
  return items;
}

// The single-process loop the trainer runs.
std::vector<float> SerialSum(const std::vector<std::vector<float>>& items, int64_t n) {
  std::vector<float> out(n, 0.0f);
  for (const auto& item : items) {
    for (int64_t p = 0; p < n; ++p) out[p] += item[p];
  }
  return out;
}

// What every rank of a group of `size` gets from OrderedSum of `items` owned by `owner`.
std::vector<std::vector<float>> OrderedSumOnEveryRank(const std::vector<std::vector<float>>& items,
                                                      const std::vector<int>& owner, int size,
                                                      int64_t n) {
  std::vector<std::vector<float>> got(size);
  OnGroup(size, [&](Communicator& c) {
    std::vector<const float*> mine;
    for (int64_t i : c.Owned(owner)) mine.push_back(items[i].data());
    std::vector<float> out(n, -1.0f);
    Status s = c.OrderedSum(owner, mine, n, out.data());
    EXPECT_TRUE(s.ok()) << s.ToString();
    got[c.rank()] = out;
  });
  return got;
}

TEST(CommunicatorTest, OrderedSumEqualsTheSerialLoopBitForBitForAnyOwnership) {
  const int64_t n = 1001;  // not a multiple of the group sizes
  const auto items = MakeItems(7, n, 11);
  const std::vector<float> want = SerialSum(items, n);
  // The same items summed in another order differ in some bits (the test can fail).
  std::vector<std::vector<float>> reversed(items.rbegin(), items.rend());
  ASSERT_FALSE(SameBits(SerialSum(reversed, n), want));
  for (int size : {1, 2, 3, 4}) {
    for (uint64_t trial = 0; trial < 3; ++trial) {
      Rng rng(100 + trial);
      std::vector<int> owner(items.size());
      for (int& o : owner) o = static_cast<int>(rng.Uniform() * size) % size;
      const auto got = OrderedSumOnEveryRank(items, owner, size, n);
      for (int r = 0; r < size; ++r) {
        EXPECT_TRUE(SameBits(got[r], want))
            << "size " << size << " trial " << trial << " rank " << r;
      }
    }
  }
}

// Contiguous ownership takes the chain (the running sum passed along) when it sends less: the
// same bits, with ranks that own nothing before, between and after the owners; the last
// ownership (4 owning ranks, 9 items) takes the exchange of slices.
TEST(CommunicatorTest, OrderedSumOverContiguousOwnersEqualsTheSerialLoopBitForBit) {
  const int64_t n = 1001;
  const auto items = MakeItems(9, n, 12);
  const std::vector<float> want = SerialSum(items, n);
  const std::vector<std::vector<int>> owners = {
      {0, 0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 1},
      {0, 0, 0, 2, 2, 2, 3, 3, 3}, {1, 1, 3, 3, 3, 3, 3, 3, 3}, {0, 1, 1, 1, 1, 1, 1, 2, 2},
      {0, 0, 1, 1, 2, 2, 3, 3, 3}};
  for (const auto& owner : owners) {
    const int size = *std::max_element(owner.begin(), owner.end()) + 1 + (owner[0] == 1);
    const auto got = OrderedSumOnEveryRank(items, owner, size, n);
    for (int r = 0; r < size; ++r) {
      EXPECT_TRUE(SameBits(got[r], want)) << "size " << size << " rank " << r;
    }
  }
  // No items at all: zeros everywhere.
  OnGroup(2, [&](Communicator& c) {
    std::vector<float> out(5, -1.0f);
    EXPECT_TRUE(c.OrderedSum({}, {}, 5, out.data()).ok());
    EXPECT_EQ(out, std::vector<float>(5, 0.0f));
  });
}

TEST(CommunicatorTest, SplitContiguousGivesOrderedRunsOfAboutEqualCost) {
  const std::vector<double> costs = {5, 1, 1, 1, 1, 1, 4, 2, 2, 2};  // 20 in all
  for (int ranks : {1, 2, 3, 4}) {
    const std::vector<int> owner = SplitContiguous(costs, ranks);
    ASSERT_EQ(owner.size(), costs.size());
    EXPECT_TRUE(std::is_sorted(owner.begin(), owner.end()));
    EXPECT_EQ(owner.front(), 0);
    std::vector<double> load(ranks, 0.0);
    for (size_t i = 0; i < costs.size(); ++i) {
      ASSERT_GE(owner[i], 0);
      ASSERT_LT(owner[i], ranks);
      load[owner[i]] += costs[i];
    }
    // Every rank within the largest item's cost of the fair share.
    for (int r = 0; r < ranks; ++r) EXPECT_LE(std::abs(load[r] - 20.0 / ranks), 5.0) << ranks;
  }
  EXPECT_EQ(SplitContiguous({1, 1, 1, 1}, 2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(SplitContiguous({0, 0, 0, 0}, 2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(SplitContiguous({3}, 4), (std::vector<int>{2}));  // the rank of its midpoint
}

TEST(CommunicatorTest, OrderedSumRejectsAnOwnershipThatDoesNotMatchTheItems) {
  OnGroup(2, [&](Communicator& c) {
    std::vector<float> item(4, 1.0f), out(4);
    // Both ranks pass one item although rank 0 owns both.
    Status s = c.OrderedSum({0, 0}, {item.data()}, 4, out.data());
    if (c.rank() == 0) {
      EXPECT_FALSE(s.ok());
    } else {
      EXPECT_NE(s.message().find("local items"), std::string::npos) << s.ToString();
    }
  });
}

TEST(CommunicatorTest, AllreduceSumAddsInRankOrderOnEveryRank) {
  for (int size : {1, 2, 3}) {
    const int64_t n = 37;
    const auto items = MakeItems(size, n, 5 + size);
    const std::vector<float> want = SerialSum(items, n);
    std::vector<double> dwant(n, 0.0);
    for (const auto& item : items) {
      for (int64_t p = 0; p < n; ++p) dwant[p] += static_cast<double>(item[p]) * 3;
    }
    OnGroup(size, [&](Communicator& c) {
      std::vector<float> x = items[c.rank()];
      ASSERT_TRUE(c.AllreduceSum(x.data(), n).ok());
      EXPECT_TRUE(SameBits(x, want)) << "size " << size << " rank " << c.rank();
      std::vector<double> d(n);
      for (int64_t p = 0; p < n; ++p) d[p] = static_cast<double>(items[c.rank()][p]) * 3;
      ASSERT_TRUE(c.AllreduceSum(d.data(), n).ok());
      EXPECT_EQ(std::memcmp(d.data(), dwant.data(), n * sizeof(double)), 0);
    });
  }
}

TEST(CommunicatorTest, AllGatherItemsPutsEveryValueInItsPlace) {
  const std::vector<int> owner = {2, 0, 0, 1, 2, 1, 0};
  OnGroup(3, [&](Communicator& c) {
    std::vector<double> mine;
    for (int64_t i : c.Owned(owner)) mine.push_back(10.0 * i + 0.5);
    std::vector<double> values;
    ASSERT_TRUE(c.AllGatherItems(owner, mine, &values).ok());
    ASSERT_EQ(values.size(), owner.size());
    for (size_t i = 0; i < owner.size(); ++i) EXPECT_EQ(values[i], 10.0 * i + 0.5);
  });
}

TEST(CommunicatorTest, AgreeGivesEveryRankTheLowestFailingRanksError) {
  OnGroup(3, [&](Communicator& c) {
    Status mine = c.rank() == 0 ? Status::Ok()
                                : DataLossError("bad file on rank " + std::to_string(c.rank()));
    Status s = c.Agree(mine);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss);
    EXPECT_EQ(s.message(), "rank 1: bad file on rank 1");
    EXPECT_TRUE(c.WasAgreed(s));
    EXPECT_FALSE(c.WasAgreed(DataLossError("bad file on rank 1")));
    EXPECT_TRUE(c.Agree(Status::Ok()).ok());
  });
  auto single = MakeSingleProcess();
  Status s = single->Agree(IoError("x"));
  EXPECT_EQ(s.message(), "x");
}

TEST(CommunicatorTest, BroadcastGatherAndAllToAllMoveTheRightBytes) {
  OnGroup(3, [&](Communicator& c) {
    std::string b = c.rank() == 1 ? std::string("from one\0x", 10) : "";
    ASSERT_TRUE(c.Broadcast(&b, 1).ok());
    EXPECT_EQ(b, std::string("from one\0x", 10));
    std::vector<std::string> all;
    ASSERT_TRUE(c.Gather("r" + std::to_string(c.rank()), 2, &all).ok());
    if (c.rank() == 2) {
      EXPECT_EQ(all, (std::vector<std::string>{"r0", "r1", "r2"}));
    } else {
      EXPECT_TRUE(all.empty());
    }
    std::vector<std::string> send, recv;
    for (int r = 0; r < 3; ++r) send.push_back(std::to_string(c.rank()) + ">" + std::to_string(r));
    ASSERT_TRUE(c.AllToAll(send, &recv).ok());
    for (int s = 0; s < 3; ++s)
      EXPECT_EQ(recv[s], std::to_string(s) + ">" + std::to_string(c.rank()));
    ASSERT_TRUE(c.Barrier().ok());
  });
}

TEST(CommunicatorTest, AbortOfALocalRankReleasesTheOthers) {
  OnGroup(2, [&](Communicator& c) {
    if (c.rank() == 1) {
      EXPECT_THROW(c.Abort("gone", 1), std::runtime_error);
    } else {
      // Rank 0 waits in a collective that rank 1 never enters: the abort ends the wait.
      EXPECT_THROW((void)c.Barrier(), std::runtime_error);
    }
  });
}

TEST(CommunicatorTest, BalanceByCostSpreadsTheCostAndIsDeterministic) {
  const std::vector<double> costs = {9, 1, 8, 2, 7, 3, 6, 4, 5};
  const std::vector<int> owner = BalanceByCost(costs, 3);
  ASSERT_EQ(owner.size(), costs.size());
  std::vector<double> load(3, 0);
  for (size_t i = 0; i < costs.size(); ++i) {
    ASSERT_GE(owner[i], 0);
    ASSERT_LT(owner[i], 3);
    load[owner[i]] += costs[i];
  }
  // Greedy by decreasing cost is within 4/3 of the best split (15 each here).
  EXPECT_EQ(load[0] + load[1] + load[2], 45);
  EXPECT_LE(*std::max_element(load.begin(), load.end()), 20);
  EXPECT_GE(*std::min_element(load.begin(), load.end()), 10);
  EXPECT_EQ(BalanceByCost(costs, 3), owner);
  EXPECT_EQ(BalanceByCost(costs, 1), std::vector<int>(costs.size(), 0));
  // More ranks than items: every item alone on its own rank.
  const std::vector<int> spread = BalanceByCost({1, 1}, 4);
  EXPECT_NE(spread[0], spread[1]);
}

TEST(CommunicatorTest, SingleProcessWorldWithoutALauncher) {
  Communicator& w = World();
  EXPECT_EQ(w.size(), 1);
  EXPECT_EQ(w.rank(), 0);
  EXPECT_FALSE(MpiDescription().empty());
}

}  // namespace
}  // namespace tpugraphs::distributed
