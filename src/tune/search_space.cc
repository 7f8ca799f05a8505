#include "tpugraphs/tune/search_space.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "tpugraphs/common/hash.h"
#include "tpugraphs/ingest/node_features.h"
#include "tpugraphs/synth/ground_truth.h"

namespace tpugraphs::tune {
namespace {

using synth::IsPermutation;

constexpr int kDims = 6;
constexpr int kTileGroups = 3;  // kernel, output, input (config_feat column order)

const int8_t* Block(const Config& c, const LayoutSlot& s) {
  return c.layout.data() + s.node * kLayoutConfigFeatureCount + s.tensor * kDims;
}

// A slot's minor_to_major list: its values up to the first -1.
void ReadBlockInto(const int8_t* b, std::vector<int64_t>* out) {
  out->clear();
  for (int d = 0; d < kDims && b[d] != -1; ++d) out->push_back(b[d]);
}

std::vector<int64_t> ReadBlock(const int8_t* b) {
  std::vector<int64_t> out;
  ReadBlockInto(b, &out);
  return out;
}

// ReadBlock(a) == ReadBlock(b), without building either list.
bool SameBlock(const int8_t* a, const int8_t* b) {
  for (int d = 0; d < kDims; ++d) {
    const bool end_a = a[d] == -1, end_b = b[d] == -1;
    if (end_a || end_b) return end_a == end_b;
    if (a[d] != b[d]) return false;
  }
  return true;
}

std::string SlotName(const LayoutSlot& s) {
  static const char* kTensor[] = {"output", "input", "kernel"};
  return "configurable node " + std::to_string(s.node) + " " + kTensor[s.tensor];
}

// Tile sizes along a dimension of size d: powers of two and 3 * 2^k below d, and d.
std::vector<int64_t> TileCandidates(int64_t d) {
  std::set<int64_t> c;
  for (int64_t p = 1; p < d; p *= 2) c.insert(p);
  for (int64_t p = 3; p < d; p *= 2) c.insert(p);
  c.insert(std::max<int64_t>(d, 1));
  return {c.begin(), c.end()};
}

// Bounds of the three groups of one config_feat row; false if a group has more than 6 entries.
bool DecodeTile(const float* f, std::vector<std::vector<int64_t>>* bounds) {
  bounds->assign(kTileGroups, {});
  for (int g = 0; g < kTileGroups; ++g) {
    const float* x = f + g * 8;
    double sum = 0;
    for (int i = 0; i < kDims && x[i] != 0.0f; ++i) {
      if (!(x[i] >= 1) || x[i] != std::floor(x[i]) || x[i] > 1e15) return false;
      (*bounds)[g].push_back(static_cast<int64_t>(x[i]));
      sum += x[i];
    }
    if (std::fabs(sum - x[kDims]) > 0.5) return false;
  }
  return true;
}

}  // namespace

uint64_t HashConfig(const Config& c) {
  uint64_t h = Fnv1a(c.layout.data(), c.layout.size());
  for (float v : c.tile) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    h = Fnv1aStep(h, bits);  // a 32-bit word per round, as the stored hashes were made
  }
  return h;
}

StatusOr<SearchSpace> SearchSpace::FromGraph(const Graph& g, const std::string& what,
                                             bool restrict_to_dataset) {
  if (g.num_configs < 1) {
    return InvalidArgumentError(what + ": graph " + g.Id() +
                                " has no configuration to start the search from");
  }
  SearchSpace s;
  s.task_ = g.kind;
  if (g.is_tile()) {
    s.base_.tile.assign(g.config_feat.begin(), g.config_feat.begin() + kTileConfigFeatureCount);
    TPUG_RETURN_IF_ERROR(FinishTile(g, what, restrict_to_dataset, &s));
    return s;
  }
  s.nc_ = g.num_config_nodes();
  if (s.nc_ == 0) {
    return InvalidArgumentError(what + ": graph " + g.Id() +
                                " has no configurable node (convolution, dot or reshape): there "
                                "is no layout to tune");
  }
  if (!g.has_layout_configs()) return InternalError(what + ": layout values not loaded");
  const int64_t row = s.nc_ * kLayoutConfigFeatureCount;
  s.base_.layout.assign(g.node_config_feat.begin(), g.node_config_feat.begin() + row);
  for (int64_t k = 0; k < s.nc_; ++k) {
    for (int t = 0; t < 3; ++t) {
      int64_t rank = 0;
      for (int64_t c = 0; c < g.num_configs; ++c) {
        const int8_t* b = &g.node_config_feat[c * row + k * kLayoutConfigFeatureCount + t * kDims];
        for (int d = 0; d < kDims && b[d] != -1; ++d) {
          rank = std::max<int64_t>(rank, std::max<int64_t>(d + 1, b[d] + 1));
        }
      }
      if (rank == 0 && t == 0) {
        // The output's rank from the node's shape (node features 21-26 and their count 28).
        const float* f = &g.node_feat[g.node_config_ids[k] * kNodeFeatureCount];
        int64_t r = 0;
        double product = 1;
        while (r < kDims && f[21 + r] > 0) product *= f[21 + r++];
        if (r > 0 && std::fabs(product - f[28]) <= 1e-3 * std::max(1.0, product)) rank = r;
      }
      // In the dataset's space any tensor the configurations set to two or more values is a
      // decision, whatever its rank (a rank-1 tensor can be measured with and without a layout).
      if (!restrict_to_dataset && (rank < 2 || rank > kDims)) continue;
      LayoutVariable var{rank, true, {{k, t}}, -1, {}};
      if (restrict_to_dataset) {
        std::set<std::vector<int64_t>> values;
        for (int64_t c = 0; c < g.num_configs; ++c) {
          const std::vector<int64_t> m2m =
              ReadBlock(&g.node_config_feat[c * row + k * kLayoutConfigFeatureCount + t * kDims]);
          // Every value a measured configuration gives the tensor is valid: the compiler ran it.
          // Real release files hold partial minor_to_major lists (e.g. {0, 2} for a rank-3
          // tensor), so validity here is membership, not being a full permutation.
          values.insert(m2m);
        }
        if (values.size() < 2) continue;  // one value: nothing to choose
        var.domain.assign(values.begin(), values.end());
      }
      s.variables_.push_back(std::move(var));
    }
  }
  if (s.variables_.empty()) {
    return InvalidArgumentError(what + ": graph " + g.Id() +
                                " has no tensor of rank 2 to 6 whose layout can change");
  }
  return s;
}

StatusOr<SearchSpace> SearchSpace::FromModule(const Graph& g, const xla::HloModuleProto& module,
                                              const std::string& what, bool allow_empty) {
  if (!g.is_layout()) return InvalidArgumentError(what + ": FromModule is for layout graphs");
  if (allow_empty && g.num_config_nodes() == 0) {
    SearchSpace s;
    s.task_ = TaskKind::kLayout;
    return s;
  }
  if (g.num_config_nodes() == 0 || g.num_configs < 1) {
    return InvalidArgumentError(what + ": graph " + g.Id() +
                                " has no configurable node (convolution, dot or reshape): there "
                                "is no layout to tune");
  }
  SearchSpace s;
  s.task_ = TaskKind::kLayout;
  s.nc_ = g.num_config_nodes();
  const int64_t row = s.nc_ * kLayoutConfigFeatureCount;
  s.base_.layout.assign(g.node_config_feat.begin(), g.node_config_feat.begin() + row);
  std::vector<const xla::HloInstructionProto*> by_node;
  std::unordered_map<int64_t, int64_t> node_of_id;
  for (const auto& comp : module.computations()) {
    for (const auto& inst : comp.instructions()) {
      node_of_id[inst.id()] = static_cast<int64_t>(by_node.size());
      by_node.push_back(&inst);
    }
  }
  std::map<int64_t, size_t> var_of_node;  // producing node -> variable
  for (int64_t k = 0; k < s.nc_; ++k) {
    const int64_t v = g.node_config_ids[k];
    if (v < 0 || v >= static_cast<int64_t>(by_node.size())) {
      return InvalidArgumentError(what + ": configurable node " + std::to_string(v) +
                                  " is not in the program");
    }
    const auto& inst = *by_node[v];
    const int operands = inst.opcode() == "reshape" ? 1 : std::min(2, inst.operand_ids_size());
    for (int t = 0; t <= operands; ++t) {
      int64_t producer = v;
      if (t > 0) {
        const auto it = node_of_id.find(inst.operand_ids(t - 1));
        if (it == node_of_id.end()) continue;
        producer = it->second;
      }
      const xla::ShapeProto& shape = by_node[producer]->shape();
      if (shape.element_type() == xla::TUPLE || shape.element_type() == xla::TOKEN ||
          shape.element_type() == xla::OPAQUE_TYPE) {
        continue;
      }
      const int64_t rank = shape.dimensions_size();
      if (rank < 2 || rank > kDims) continue;
      auto [it, fresh] = var_of_node.emplace(producer, s.variables_.size());
      if (fresh) {
        s.variables_.push_back({rank, shape.layout().minor_to_major().empty(), {}, producer, {}});
      }
      s.variables_[it->second].slots.push_back({k, t});
    }
  }
  if (s.variables_.empty() && !allow_empty) {
    return InvalidArgumentError(what + ": graph " + g.Id() +
                                " has no tensor of rank 2 to 6 whose layout can change");
  }
  return s;
}

StatusOr<SearchSpace> SearchSpace::FromTileDims(const Graph& g, const std::vector<int64_t>& output,
                                                const std::vector<int64_t>& kernel,
                                                const std::string& what, bool restrict_to_dataset) {
  if (!g.is_tile() || g.num_configs < 1) {
    return InvalidArgumentError(what + ": graph " + g.Id() +
                                " is not a tile graph with a configuration");
  }
  SearchSpace s;
  s.task_ = TaskKind::kTile;
  s.base_.tile.assign(g.config_feat.begin(), g.config_feat.begin() + kTileConfigFeatureCount);
  s.groups_.resize(kTileGroups);
  s.groups_[0].dims = kernel;
  s.groups_[1].dims = output;
  TPUG_RETURN_IF_ERROR(FinishTile(g, what, restrict_to_dataset, &s));
  return s;
}

Status SearchSpace::FinishTile(const Graph& g, const std::string& what, bool restrict,
                               SearchSpace* s) {
  std::vector<std::vector<int64_t>> base;
  if (!DecodeTile(s->base_.tile.data(), &base)) {
    return InvalidArgumentError(what + ": graph " + g.Id() +
                                ": configuration 0's tile bounds cannot be read back (more than 6 "
                                "dimensions or non-integer values)");
  }
  const bool given = !s->groups_.empty();
  s->groups_.resize(kTileGroups);
  std::vector<std::vector<std::set<int64_t>>> seen(kTileGroups);
  for (int gi = 0; gi < kTileGroups; ++gi) seen[gi].resize(base[gi].size());
  std::vector<std::vector<int64_t>> largest = base;
  std::vector<std::vector<std::vector<int64_t>>> dataset;
  for (int64_t c = 0; c < g.num_configs; ++c) {
    std::vector<std::vector<int64_t>> b;
    if (!DecodeTile(&g.config_feat[c * kTileConfigFeatureCount], &b)) continue;
    bool same = true;
    for (int gi = 0; gi < kTileGroups; ++gi) same = same && b[gi].size() == base[gi].size();
    if (!same) continue;
    for (int gi = 0; gi < kTileGroups; ++gi) {
      for (size_t d = 0; d < b[gi].size(); ++d) {
        seen[gi][d].insert(b[gi][d]);
        largest[gi][d] = std::max(largest[gi][d], b[gi][d]);
      }
    }
    dataset.push_back(std::move(b));
  }
  if (!given) {
    s->groups_[0].dims = largest[0];
    s->groups_[1].dims = largest[1];
    // The output's dims from the entry root (the last node marked is_root).
    for (int64_t v = g.num_nodes() - 1; v >= 0; --v) {
      const float* f = &g.node_feat[v * kNodeFeatureCount];
      if (f[0] != 1.0f) continue;
      bool ok = base[1].size() <= static_cast<size_t>(kDims);
      for (size_t d = 0; ok && d < base[1].size(); ++d) ok = f[21 + d] >= largest[1][d];
      if (ok) {
        for (size_t d = 0; d < base[1].size(); ++d) {
          s->groups_[1].dims[d] = static_cast<int64_t>(f[21 + d]);
        }
      }
      break;
    }
  }
  s->groups_[2].dims = largest[2];
  for (int gi = 0; gi < kTileGroups; ++gi) {
    TileGroup& grp = s->groups_[gi];
    if (grp.dims.size() != base[gi].size()) {
      return InvalidArgumentError(what + ": graph " + g.Id() + ": the kernel has " +
                                  std::to_string(grp.dims.size()) + " dimensions in group " +
                                  std::to_string(gi) + " but configuration 0 tiles " +
                                  std::to_string(base[gi].size()));
    }
    grp.candidates.clear();
    for (size_t d = 0; d < grp.dims.size(); ++d) {
      std::set<int64_t> c;
      if (!restrict) {
        for (int64_t v : TileCandidates(grp.dims[d])) c.insert(v);
      }
      c.insert(base[gi][d]);
      for (int64_t v : seen[gi][d]) {
        if (v <= grp.dims[d]) c.insert(v);
      }
      grp.candidates.emplace_back(c.begin(), c.end());
    }
  }
  s->max_tiles_ = 256;
  for (const auto& b : dataset) s->max_tiles_ = std::max(s->max_tiles_, s->NumTiles(b));
  if (s->num_decisions() == 0) {
    return InvalidArgumentError(what + ": graph " + g.Id() + " has no tile dimension to search");
  }
  return Status::Ok();
}

int64_t SearchSpace::num_decisions() const {
  if (task_ == TaskKind::kLayout) return static_cast<int64_t>(variables_.size());
  int64_t n = 0;
  for (const auto& grp : groups_) n += static_cast<int64_t>(grp.dims.size());
  return n;
}

double SearchSpace::NumTiles(const std::vector<std::vector<int64_t>>& bounds) const {
  double n = 1;
  for (size_t gi = 0; gi < groups_.size() && gi < bounds.size(); ++gi) {
    for (size_t d = 0; d < bounds[gi].size() && d < groups_[gi].dims.size(); ++d) {
      n *= std::ceil(static_cast<double>(groups_[gi].dims[d]) /
                     static_cast<double>(std::max<int64_t>(bounds[gi][d], 1)));
    }
  }
  return n;
}

Config SearchSpace::TileConfig(const std::vector<std::vector<int64_t>>& bounds) const {
  Config c;
  c.tile.resize(kTileConfigFeatureCount);
  ingest::FeaturizeTileBounds(bounds[0], bounds[1], bounds[2], c.tile.data());
  return c;
}

std::vector<std::vector<int64_t>> SearchSpace::TileBounds(const Config& c) const {
  std::vector<std::vector<int64_t>> b;
  DecodeTile(c.tile.data(), &b);
  return b;
}

std::vector<int64_t> SearchSpace::Get(const Config& c, size_t v) const {
  return ReadBlock(Block(c, variables_[v].slots[0]));
}

void SearchSpace::Set(Config* c, size_t v, const std::vector<int64_t>& m2m) const {
  int8_t block[kDims];
  for (int d = 0; d < kDims; ++d) {
    block[d] = d < static_cast<int>(m2m.size()) ? static_cast<int8_t>(m2m[d]) : int8_t{-1};
  }
  SetBlock(c, v, block);
}

void SearchSpace::CopyVariable(Config* c, const Config& from, size_t v) const {
  const int8_t* src = Block(from, variables_[v].slots[0]);
  int8_t block[kDims];
  bool ended = false;  // as Set(c, v, Get(from, v)): -1 from the first -1 on
  for (int d = 0; d < kDims; ++d) {
    ended = ended || src[d] == -1;
    block[d] = ended ? int8_t{-1} : src[d];
  }
  SetBlock(c, v, block);
}

void SearchSpace::SetBlock(Config* c, size_t v, const int8_t* block) const {
  for (const LayoutSlot& s : variables_[v].slots) {
    std::memcpy(c->layout.data() + s.node * kLayoutConfigFeatureCount + s.tensor * kDims, block,
                kDims);
  }
}

Status SearchSpace::Check(const Config& c) const {
  if (task_ == TaskKind::kTile) {
    if (c.tile.size() != static_cast<size_t>(kTileConfigFeatureCount)) {
      return InvalidArgumentError("tile configuration of " + std::to_string(c.tile.size()) +
                                  " values, expected 24");
    }
    std::vector<std::vector<int64_t>> b;
    if (!DecodeTile(c.tile.data(), &b)) {
      return InvalidArgumentError("tile configuration whose bounds cannot be read back");
    }
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      if (b[gi].size() != groups_[gi].dims.size()) {
        return InvalidArgumentError("tile group " + std::to_string(gi) + " has " +
                                    std::to_string(b[gi].size()) + " bounds, the kernel " +
                                    std::to_string(groups_[gi].dims.size()) + " dimensions");
      }
      for (size_t d = 0; d < b[gi].size(); ++d) {
        const auto& cand = groups_[gi].candidates[d];
        if (!std::binary_search(cand.begin(), cand.end(), b[gi][d])) {
          return InvalidArgumentError("tile bound " + std::to_string(b[gi][d]) + " of group " +
                                      std::to_string(gi) + " dimension " + std::to_string(d) +
                                      " (size " + std::to_string(groups_[gi].dims[d]) +
                                      ") is not an allowed tile size");
        }
      }
    }
    if (c.tile != TileConfig(b).tile) {
      return InvalidArgumentError("tile configuration's sum/product columns do not match");
    }
    if (NumTiles(b) > max_tiles_) {
      return InvalidArgumentError("tile configuration makes " + std::to_string(NumTiles(b)) +
                                  " tiles, more than " + std::to_string(max_tiles_));
    }
    return Status::Ok();
  }
  if (c.layout.size() != base_.layout.size()) {
    return InvalidArgumentError("layout configuration of " + std::to_string(c.layout.size()) +
                                " values, expected " + std::to_string(base_.layout.size()));
  }
  std::vector<char> covered(static_cast<size_t>(nc_ * 3), 0);
  std::vector<int64_t> first, m2m;  // reused: no allocation per slot
  for (const LayoutVariable& var : variables_) {
    ReadBlockInto(Block(c, var.slots[0]), &first);
    for (const LayoutSlot& s : var.slots) {
      covered[s.node * 3 + s.tensor] = 1;
      const int8_t* b = Block(c, s);
      const int8_t* base = Block(base_, s);
      if (std::equal(b, b + kDims, base)) continue;  // as the dataset has it
      ReadBlockInto(b, &m2m);
      for (int d = static_cast<int>(m2m.size()); d < kDims; ++d) {
        if (b[d] != -1) {
          return InvalidArgumentError(SlotName(s) + ": values after the first -1");
        }
      }
      if (!var.domain.empty()) {
        if (!std::binary_search(var.domain.begin(), var.domain.end(), m2m)) {
          return InvalidArgumentError(SlotName(s) +
                                      ": layout is not one the dataset gives this tensor");
        }
      } else if (m2m.empty() ? !var.allow_compiler_choice : !IsPermutation(m2m, var.rank)) {
        return InvalidArgumentError(SlotName(s) + ": layout is not a permutation of its " +
                                    std::to_string(var.rank) + " dimensions");
      }
      if (m2m != first) {
        return InvalidArgumentError(SlotName(s) +
                                    ": differs from the other tensors of the same array");
      }
    }
  }
  for (int64_t k = 0; k < nc_; ++k) {
    for (int t = 0; t < 3; ++t) {
      if (covered[k * 3 + t]) continue;
      const LayoutSlot s{k, t};
      if (!std::equal(Block(c, s), Block(c, s) + kDims, Block(base_, s))) {
        return InvalidArgumentError(SlotName(s) + ": not searchable, must keep its value");
      }
    }
  }
  return Status::Ok();
}

std::vector<int64_t> SearchSpace::NewLayout(const LayoutVariable& var,
                                            const std::vector<int64_t>& cur, Rng& rng) const {
  if (!var.domain.empty()) {  // another of the dataset's values, uniformly
    const size_t n = var.domain.size();
    const auto at = std::find(var.domain.begin(), var.domain.end(), cur) - var.domain.begin();
    if (static_cast<size_t>(at) == n) return var.domain[rng.UniformInt(n)];
    size_t pick = rng.UniformInt(n - 1);
    if (pick >= static_cast<size_t>(at)) ++pick;
    return var.domain[pick];
  }
  const int64_t r = var.rank;
  std::vector<int64_t> from = cur;
  if (!IsPermutation(from, r)) {  // compiler's choice or a partial list: start from row-major
    from.clear();
    for (int64_t d = r - 1; d >= 0; --d) from.push_back(d);
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    const double u = rng.Uniform();
    std::vector<int64_t> out;
    if (u < 0.15 && var.allow_compiler_choice) {
      out.clear();  // the compiler's choice
    } else if (u < 0.6) {
      // A new (most minor, second most minor) pair; the rest keep their relative order.
      const int64_t a = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(r)));
      int64_t b = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(r - 1)));
      if (b >= a) ++b;
      out = {a, b};
      for (int64_t d : from) {
        if (d != a && d != b) out.push_back(d);
      }
    } else if (u < 0.9) {
      out = from;  // swap two positions
      const int64_t i = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(r)));
      int64_t j = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(r - 1)));
      if (j >= i) ++j;
      std::swap(out[i], out[j]);
    } else {
      out = from;
      rng.Shuffle(out);
    }
    if (out != cur) return out;
  }
  return cur;
}

Config SearchSpace::Mutate(const Config& c, Rng& rng) const {
  Config out = c;
  const int64_t n = num_decisions();
  const int64_t count = 1 + static_cast<int64_t>(rng.UniformInt(std::min<int64_t>(3, n)));
  const std::vector<int64_t> picks = rng.SampleWithoutReplacement(n, count);
  if (task_ == TaskKind::kLayout) {
    for (int64_t v : picks) {
      Set(&out, static_cast<size_t>(v), NewLayout(variables_[v], Get(out, v), rng));
    }
    return out;
  }
  std::vector<std::vector<int64_t>> b = TileBounds(c);
  for (int attempt = 0; attempt < 32; ++attempt) {
    std::vector<std::vector<int64_t>> nb = b;
    for (int64_t pick : picks) {
      int64_t p = pick;
      size_t gi = 0;
      while (p >= static_cast<int64_t>(groups_[gi].dims.size())) p -= groups_[gi++].dims.size();
      const auto& cand = groups_[gi].candidates[p];
      const int64_t at = std::lower_bound(cand.begin(), cand.end(), nb[gi][p]) - cand.begin();
      int64_t next;
      if (rng.Uniform() < 0.6 && cand.size() > 1) {  // a neighbouring size
        next = at + (rng.Uniform() < 0.5 ? -1 : 1);
        if (next < 0) next = 1;
        if (next >= static_cast<int64_t>(cand.size())) next = static_cast<int64_t>(cand.size()) - 2;
      } else {
        next = static_cast<int64_t>(rng.UniformInt(cand.size()));
      }
      nb[gi][p] = cand[static_cast<size_t>(std::max<int64_t>(next, 0))];
    }
    if (NumTiles(nb) <= max_tiles_ && nb != b) return TileConfig(nb);
  }
  return c;
}

Config SearchSpace::Crossover(const Config& a, const Config& b, Rng& rng) const {
  if (task_ == TaskKind::kLayout) {
    Config out = a;
    for (size_t v = 0; v < variables_.size(); ++v) {
      if (rng.Uniform() < 0.5) CopyVariable(&out, b, v);
    }
    return out;
  }
  std::vector<std::vector<int64_t>> ba = TileBounds(a), bb = TileBounds(b);
  for (size_t gi = 0; gi < ba.size(); ++gi) {
    if (rng.Uniform() < 0.5) ba[gi] = bb[gi];
  }
  return NumTiles(ba) <= max_tiles_ ? TileConfig(ba) : a;
}

Config SearchSpace::Random(Rng& rng) const {
  if (task_ == TaskKind::kLayout) {
    Config out = base_;
    for (size_t v = 0; v < variables_.size(); ++v) {
      const LayoutVariable& var = variables_[v];
      if (!var.domain.empty()) {
        Set(&out, v, var.domain[rng.UniformInt(var.domain.size())]);
        continue;
      }
      // Uniform over the r! permutations (+ the compiler's choice when allowed).
      int64_t perms = 1;
      for (int64_t i = 2; i <= var.rank; ++i) perms *= i;
      std::vector<int64_t> m2m;
      if (!var.allow_compiler_choice || rng.UniformInt(static_cast<uint64_t>(perms + 1)) != 0) {
        for (int64_t d = 0; d < var.rank; ++d) m2m.push_back(d);
        rng.Shuffle(m2m);
      }
      Set(&out, v, m2m);
    }
    return out;
  }
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::vector<std::vector<int64_t>> b(groups_.size());
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      for (const auto& cand : groups_[gi].candidates) {
        b[gi].push_back(cand[rng.UniformInt(cand.size())]);
      }
    }
    if (NumTiles(b) <= max_tiles_) return TileConfig(b);
  }
  return base_;
}

int64_t SearchSpace::Distance(const Config& a, const Config& b) const {
  int64_t n = 0;
  if (task_ == TaskKind::kLayout) {
    for (const LayoutVariable& var : variables_) {
      n += !SameBlock(Block(a, var.slots[0]), Block(b, var.slots[0]));
    }
    return n;
  }
  const auto ba = TileBounds(a), bb = TileBounds(b);
  for (size_t gi = 0; gi < ba.size() && gi < bb.size(); ++gi) {
    for (size_t d = 0; d < ba[gi].size() && d < bb[gi].size(); ++d) n += ba[gi][d] != bb[gi][d];
  }
  return n;
}

bool SearchSpace::WithinDistance(const Config& a, const Config& b, int64_t limit) const {
  if (task_ != TaskKind::kLayout) return Distance(a, b) <= limit;
  int64_t n = 0;
  for (const LayoutVariable& var : variables_) {
    const LayoutSlot& s = var.slots[0];
    const size_t at = static_cast<size_t>(s.node * kLayoutConfigFeatureCount + s.tensor * kDims);
    if (std::memcmp(a.layout.data() + at, b.layout.data() + at, kDims) != 0 && ++n > limit) {
      return false;
    }
  }
  return true;
}

}  // namespace tpugraphs::tune
