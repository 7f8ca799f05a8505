// The configuration space `tpugraphs tune` searches (docs/tune.md, "The space").
//
// Layout: a configuration is [nc, 18] int8 values in the release encoding (docs/features.md):
// per configurable node, three blocks of 6 (output, input, kernel), each either all -1 ("the
// compiler's choice") or a minor_to_major permutation of the tensor's dimensions, -1 padded.
// The searchable tensors are grouped into variables; a variable has a rank r >= 2 and one or more
// (node, tensor) slots that always hold the same layout:
//   * from a dataset graph, every tensor is its own variable; its rank is what the graph's
//     configurations show (the longest list, or the largest dimension index + 1, over all of
//     them) and it may also take the compiler's choice;
//   * from a program (HLO text or an HloModuleProto, FromModule), the ranks are the shapes' and
//     the tensors that are the same array (a node's output read as another configurable node's
//     input, or one producer read by two) share a variable, since one array has one layout in
//     HLO; when the program states a layout for every array, "compiler's choice" is not offered.
// A tensor no configuration of the dataset sets (and the program does not give) is kept as the
// base configuration has it. Ranks above 6 are not searched (the encoding keeps 6 entries).
//
// Tile: a configuration is the 24 config_feat floats, made from kernel, output and input bounds
// (6 values, sum, product each). Bound d of a group with dimension size D takes a value of
// Candidates(D) = {powers of two < D} + {3 * 2^k < D} + {D} + the values the dataset's
// configurations use, and a configuration may tile into at most max_tiles tiles (product over
// all bounds of ceil(D / bound)). The dimension sizes come from the program when given
// (synthetic ground truth), else: output dims from the entry root's shape (node features 21-26),
// kernel and input dims the largest bound the dataset's configurations use.
//
// Thread-safety: immutable after construction; methods are const.
#ifndef TPUGRAPHS_TUNE_SEARCH_SPACE_H_
#define TPUGRAPHS_TUNE_SEARCH_SPACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/status.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::tune {

// One configuration in its feature encoding: layout int8 [nc * 18], or tile float [24].
struct Config {
  std::vector<int8_t> layout;
  std::vector<float> tile;
  bool operator==(const Config& o) const { return layout == o.layout && tile == o.tile; }
};
uint64_t HashConfig(const Config& c);

struct LayoutSlot {
  int64_t node = 0;  // index into node_config_ids
  int tensor = 0;    // 0 output, 1 input, 2 kernel
};
struct LayoutVariable {
  int64_t rank = 0;
  bool allow_compiler_choice = true;
  std::vector<LayoutSlot> slots;
  int64_t array_node = -1;  // FromModule: the node whose output array this is; else -1
  // Restricted space: the layouts this tensor may take (the dataset's, sorted; an empty entry is
  // the compiler's choice). Empty: every permutation (and the compiler's choice if allowed).
  std::vector<std::vector<int64_t>> domain;
};

struct TileGroup {
  std::vector<int64_t> dims;                     // dimension sizes
  std::vector<std::vector<int64_t>> candidates;  // per dimension, ascending
};

class SearchSpace {
 public:
  // From a dataset graph: ranks, tile sizes and dims as the header says. `base` is the search's
  // starting (default) configuration, the graph's configuration 0. REQUIRES: g carries its
  // configuration values. Errors: no configurable node / no configuration / nothing to search.
  // restrict_to_dataset: each decision only takes the values the graph's configurations give it
  // (docs/tune.md, "Restricted space"); decisions with one such value are not searched.
  static StatusOr<SearchSpace> FromGraph(const Graph& g, const std::string& what,
                                         bool restrict_to_dataset = false);
  // Layout, from the program the graph was built from (the ranks and tying of the header).
  // `config_nodes`: the graph's node_config_ids. A program with nothing to choose (no
  // configurable node, or no tensor of rank 2 to 6 among their inputs and outputs) is an
  // InvalidArgument error, or with `allow_empty` a space without variables whose base is the
  // graph's configuration 0 (empty if the graph has no configurable node).
  static StatusOr<SearchSpace> FromModule(const Graph& g, const xla::HloModuleProto& module,
                                          const std::string& what, bool allow_empty = false);
  // Tile, with the kernel's true dimension sizes.
  static StatusOr<SearchSpace> FromTileDims(const Graph& g, const std::vector<int64_t>& output,
                                            const std::vector<int64_t>& kernel,
                                            const std::string& what,
                                            bool restrict_to_dataset = false);

  TaskKind task() const { return task_; }
  int64_t num_config_nodes() const { return nc_; }
  const Config& base() const { return base_; }
  const std::vector<LayoutVariable>& variables() const { return variables_; }
  const std::vector<TileGroup>& tile_groups() const { return groups_; }  // kernel, output, input
  double max_tiles() const { return max_tiles_; }
  // Number of searchable decisions (layout variables, tile dimensions).
  int64_t num_decisions() const;
  // The layout of variable v in c (empty = compiler's choice).
  std::vector<int64_t> Get(const Config& c, size_t v) const;

  // OK if `c` is in the space: InvalidArgument naming the node/tensor or bound otherwise.
  Status Check(const Config& c) const;

  // A neighbour: 1 to 3 decisions changed (docs/tune.md, "The search"). Always valid; may equal
  // `c` only when the space has a single point.
  Config Mutate(const Config& c, Rng& rng) const;
  // Every decision taken from a or b with probability 1/2 (tile: per group).
  Config Crossover(const Config& a, const Config& b, Rng& rng) const;
  // A uniformly drawn point (each decision independently uniform; tile redrawn until it fits).
  Config Random(Rng& rng) const;
  // Decisions where a and b differ.
  int64_t Distance(const Config& a, const Config& b) const;
  // Distance(a, b) <= limit, stopping as soon as it is not (no allocation for layouts).
  bool WithinDistance(const Config& a, const Config& b, int64_t limit) const;

  // Tile bounds <-> features.
  Config TileConfig(const std::vector<std::vector<int64_t>>& bounds) const;
  std::vector<std::vector<int64_t>> TileBounds(const Config& c) const;

 private:
  SearchSpace() = default;
  void Set(Config* c, size_t v, const std::vector<int64_t>& m2m) const;
  // Set(c, v, Get(from, v)), without building the list.
  void CopyVariable(Config* c, const Config& from, size_t v) const;
  // Every slot of variable v in c set to the 6 values of `block` (-1 padded).
  void SetBlock(Config* c, size_t v, const int8_t* block) const;
  std::vector<int64_t> NewLayout(const LayoutVariable& var, const std::vector<int64_t>& cur,
                                 Rng& rng) const;
  double NumTiles(const std::vector<std::vector<int64_t>>& bounds) const;
  static Status FinishTile(const Graph& g, const std::string& what, bool restrict, SearchSpace* s);

  TaskKind task_ = TaskKind::kLayout;
  int64_t nc_ = 0;
  Config base_;
  std::vector<LayoutVariable> variables_;
  std::vector<TileGroup> groups_;
  double max_tiles_ = 256;
};

}  // namespace tpugraphs::tune

#endif  // TPUGRAPHS_TUNE_SEARCH_SPACE_H_
