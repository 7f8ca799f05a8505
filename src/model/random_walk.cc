#include "tpugraphs/model/random_walk.h"

#include <cstddef>

namespace tpugraphs::model {

std::vector<float> RandomWalkReturnProbabilities(int64_t n, const std::vector<int64_t>& ptr,
                                                 const std::vector<int64_t>& adj,
                                                 const std::vector<int64_t>& nodes, int steps) {
  std::vector<float> out(nodes.size() * static_cast<size_t>(steps > 0 ? steps : 0), 0.0f);
  if (steps <= 0 || n <= 0) return out;
  // Mass at each node (dense, reset after each start through the touched lists) and the nodes
  // that hold mass now and next.
  std::vector<double> cur(n, 0.0), next(n, 0.0);
  std::vector<uint8_t> in_next(n, 0);
  std::vector<int64_t> active, touched;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int64_t start = nodes[i];
    active.assign(1, start);
    cur[start] = 1.0;
    for (int t = 1; t <= steps + 1; ++t) {
      touched.clear();
      for (int64_t w : active) {
        const double mass = cur[w];
        cur[w] = 0.0;
        const int64_t deg = ptr[w + 1] - ptr[w];
        auto give = [&](int64_t u, double m) {
          if (!in_next[u]) {
            in_next[u] = 1;
            touched.push_back(u);
          }
          next[u] += m;
        };
        if (deg == 0) {
          give(w, mass);
          continue;
        }
        const double share = mass / static_cast<double>(deg);
        for (int64_t e = ptr[w]; e < ptr[w + 1]; ++e) give(adj[e], share);
      }
      for (int64_t u : touched) {
        cur[u] = next[u];
        next[u] = 0.0;
        in_next[u] = 0;
      }
      active.swap(touched);
      if (t >= 2) out[i * steps + (t - 2)] = static_cast<float>(cur[start]);
    }
    for (int64_t w : active) cur[w] = 0.0;
  }
  return out;
}

std::vector<float> RandomWalkReturnProbabilitiesDense(int64_t n, const std::vector<int64_t>& ptr,
                                                      const std::vector<int64_t>& adj,
                                                      const std::vector<int64_t>& nodes,
                                                      int steps) {
  std::vector<float> out(nodes.size() * static_cast<size_t>(steps > 0 ? steps : 0), 0.0f);
  if (steps <= 0 || n <= 0) return out;
  // T[w][u]: probability of one step from w to u.
  std::vector<double> trans(n * n, 0.0);
  for (int64_t w = 0; w < n; ++w) {
    const int64_t deg = ptr[w + 1] - ptr[w];
    if (deg == 0) {
      trans[w * n + w] = 1.0;
      continue;
    }
    for (int64_t e = ptr[w]; e < ptr[w + 1]; ++e) trans[w * n + adj[e]] += 1.0 / deg;
  }
  std::vector<double> power = trans, prod(n * n);
  for (int t = 2; t <= steps + 1; ++t) {
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = 0; b < n; ++b) {
        double s = 0;
        for (int64_t c = 0; c < n; ++c) s += power[a * n + c] * trans[c * n + b];
        prod[a * n + b] = s;
      }
    }
    power.swap(prod);
    for (size_t i = 0; i < nodes.size(); ++i) {
      out[i * steps + (t - 2)] = static_cast<float>(power[nodes[i] * n + nodes[i]]);
    }
  }
  return out;
}

}  // namespace tpugraphs::model
