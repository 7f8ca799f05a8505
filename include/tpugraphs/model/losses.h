// Ranking and regression losses over the k scored configurations of one graph (docs/model.md,
// "Losses"). Convention: a higher score means slower, so the model ranks by ascending score.
//
// Ties in runtimes: pairs with equal runtimes are not hinge pairs; ListMLE orders ties by
// ascending index (a fixed, deterministic tie-break); MSE is unaffected.
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_MODEL_LOSSES_H_
#define TPUGRAPHS_MODEL_LOSSES_H_

#include <cstdint>

#include "tpugraphs/common/status.h"
#include "tpugraphs/model.pb.h"

namespace tpugraphs::model {

// Loss over one list of k configs of one graph. runtimes: the targets (normalized runtimes for
// tile, raw or scaled runtimes for layout; only their order matters for the ranking losses).
// Returns the loss and writes dscores[k] = d loss / d scores (if dscores != nullptr).
// k == 0 gives 0.
double ComputeLoss(const LossSpec& spec, const float* scores, const double* runtimes, int64_t k,
                   float* dscores);

// The individual terms, in double (used by ComputeLoss and by the gradient tests). Each returns
// the loss and, if dscores != nullptr, ADDS weight * d loss / d scores to dscores.
// weighting and noise: LossSpec.hinge_pair_weighting and hinge_noise (pairs weighted by their
// log-runtime gap, or by how surely measurement noise of relative deviation `noise` keeps their
// order).
double PairwiseHingeLoss(
    const double* scores, const double* runtimes, int64_t k, double margin, double weight,
    double* dscores,
    LossSpec::HingePairWeighting weighting = LossSpec::HINGE_PAIR_WEIGHTING_UNIFORM,
    double noise = 0.0);
double ListMleLoss(const double* scores, const double* runtimes, int64_t k, double temperature,
                   double weight, double* dscores);
double MseLoss(const double* scores, const double* runtimes, int64_t k, LossSpec::MseTarget target,
               double scale, double weight, double* dscores);

// Checks a LossSpec (non-negative finite weights, positive temperature, ...).
Status ValidateLossSpec(const LossSpec& spec);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_LOSSES_H_
