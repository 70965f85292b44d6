// The Byzantine gate on an uploaded pseudo-gradient (delta = theta_start - theta_end): bounds on
// its norm from the first result of a run on, a reference norm that the results it judges cannot
// ratchet up, and a check of its direction. Pure functions, so that tandem-bench-diloco measures
// the same rules the coordinator applies (docs/protocol.md, "Byzantine gate").
//
// Dimensions: P parameters.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tandem::coord {

struct GateConfig {
    // Refused above this times the reference norm (code outlier_norm).
    double maxNormRatio = 10.0;
    // Down-weighted above this times the reference: the weight is scaled so that the result
    // counts as if its norm were clipRatio x the reference. 0: no down-weighting.
    double clipRatio = 2.0;
    // Refused below this times the reference, and at norm 0 always (code zero_delta).
    double minNormRatio = 0.001;
    // Refused above this times the norm of the weights it trained from (code norm_above_bound);
    // applies from the run's first result on, when there is no reference yet. 0: off.
    double maxRelativeNorm = 1.0;
    // Refused above this absolute L2 norm (code norm_above_bound). 0: off.
    double maxAbsoluteNorm = 0;
    // Refused when the cosine similarity to the last outer step is below this (code
    // wrong_direction). -1: off, the coordinator's default; 0 here is the rule
    // tandem-bench-diloco's -gate arms measure.
    double minCosine = 0.0;
    // Rounds of accepted results whose norms make the reference (the open one and those before).
    int referenceRounds = 4;
};

// What the gate knows about one result.
struct GateInput {
    double norm = 0;                  // ||delta||
    double weightsNorm = 0;           // ||theta|| of the version it trained from
    std::optional<double> reference;  // robustReference() of the window; none before any result
    std::optional<double> cosine;     // to the reference direction; none when there is none
};

struct GateVerdict {
    std::string code;     // empty: accepted
    std::string message;  // the refusal, or why the weight was reduced (empty when it was not)
    double weightFactor = 1.0;  // in (0, 1]: multiplies the result's weight
    bool accepted() const { return code.empty(); }
};

GateVerdict judgeResult(const GateInput& in, const GateConfig& cfg);

// The lower median of the norms of accepted results (the element at (n - 1) / 2 once sorted):
// with fewer than half of them from attackers it lies within the honest norms, so results
// at maxNormRatio x the reference cannot raise it. None for an empty list.
std::optional<double> robustReference(std::vector<double> norms);

// Cosine similarity of a and b (same length), accumulated in double; none when either is zero.
std::optional<double> cosineSimilarity(std::span<const float> a, std::span<const float> b);

// The same, fed in consecutive pieces (an upload as it streams, a stored payload read in
// chunks): the sums run in the same order, so the value is bit-identical to cosineSimilarity.
class CosineAccumulator {
  public:
    void add(std::span<const float> a, std::span<const float> b);  // the next piece of each
    std::optional<double> value() const;

  private:
    double m_ab = 0, m_aa = 0, m_bb = 0;
};

double l2Norm(std::span<const float> v);  // accumulated in double

}  // namespace tandem::coord
