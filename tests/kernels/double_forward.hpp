// What the GptBackend tests share: an independent double-precision GPT forward (the oracle of
// the finite-difference checks) and the checks of Expected/Status results.
//
// Dimensions: L layers, NH heads, C channels, T sequence, B batch, V vocabulary.
#pragma once

#include "cpu_reference/reference_ops.hpp"
#include "model.hpp"

#include <QtTest>

#include <string>
#include <vector>

namespace tandem::test {

namespace ref = tandem::reference;

// The GPT-2 forward of DESIGN.md §4 in double, wired here from the parameter table independently
// of GptBackend, through the double instantiations of the reference ops. Returns the mean loss.
inline double doubleLoss(const ParameterLayout& lay, const std::vector<double>& w,
                         const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets,
                         int B, int T) {
    const ModelConfig& cfg = lay.config();
    // Only the first V rows of wte are the vocabulary's: the padded rows take no part.
    const int C = cfg.channels, NH = cfg.heads, V = cfg.vocabSize;
    const size_t btc = size_t(B) * T * C, bt = size_t(B) * T;
    const BlockOffsets& o = lay.block();
    using Vec = std::vector<double>;
    Vec x(btc), ln(btc), mean(bt), rstd(bt), qkv(3 * btc), y(btc), proj(btc), next(btc);
    Vec fc(4 * btc), fcGelu(4 * btc), preatt(size_t(B) * NH * T * T), att(preatt.size());
    Vec logits(bt * V), probs(bt * V), losses(bt);
    ref::encoderForward(x.data(), inputs.data(), &w[lay.wte()], &w[lay.wpe()], B, T, C);
    for (int l = 0; l < cfg.layers; ++l) {
        const double* p = &w[lay.blockStart(l)];
        ref::layernormForward(ln.data(), mean.data(), rstd.data(), x.data(), p + o.ln1Weight,
                              p + o.ln1Bias, B, T, C);
        ref::matmulForward(qkv.data(), ln.data(), p + o.qkvWeight, p + o.qkvBias, B, T, C, 3 * C);
        ref::attentionForward(y.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
        ref::matmulForward(proj.data(), y.data(), p + o.attnProjWeight, p + o.attnProjBias, B, T, C,
                           C);
        ref::residualForward(next.data(), x.data(), proj.data(), int64_t(btc));
        x.swap(next);
        ref::layernormForward(ln.data(), mean.data(), rstd.data(), x.data(), p + o.ln2Weight,
                              p + o.ln2Bias, B, T, C);
        ref::matmulForward(fc.data(), ln.data(), p + o.fcWeight, p + o.fcBias, B, T, C, 4 * C);
        ref::geluForward(fcGelu.data(), fc.data(), int64_t(4 * btc));
        ref::matmulForward(proj.data(), fcGelu.data(), p + o.fcProjWeight, p + o.fcProjBias, B, T,
                           4 * C, C);
        ref::residualForward(next.data(), x.data(), proj.data(), int64_t(btc));
        x.swap(next);
    }
    ref::layernormForward(ln.data(), mean.data(), rstd.data(), x.data(), &w[lay.lnfWeight()],
                          &w[lay.lnfBias()], B, T, C);
    ref::matmulForward(logits.data(), ln.data(), &w[lay.wte()], static_cast<const double*>(nullptr),
                       B, T, C, V);
    ref::softmaxCrossEntropyForward(losses.data(), probs.data(), logits.data(), targets.data(), B,
                                    T, V, V);
    double sum = 0.0;
    for (double loss : losses)
        sum += loss;
    return sum / static_cast<double>(bt);
}

#define VERIFY_OK(expr)                                                              \
    do {                                                                             \
        const auto& result_ = (expr);                                                \
        QVERIFY2(result_.ok(), result_.ok() ? "" : result_.error().message.c_str()); \
    } while (false)

// Whether a result is an error whose message contains `expected`; *why says what was found.
template <class Result>
bool failsWith(const Result& result, const std::string& expected, QString* why) {
    if (result.ok()) {
        *why = QString("accepted, expected an error containing '%1'")
                   .arg(QString::fromStdString(expected));
        return false;
    }
    *why =
        QString("message '%1' lacks '%2'")
            .arg(QString::fromStdString(result.error().message), QString::fromStdString(expected));
    return result.error().message.find(expected) != std::string::npos;
}

#define VERIFY_ERROR(expr, expected)                                                    \
    do {                                                                                \
        QString why_;                                                                   \
        QVERIFY2(tandem::test::failsWith((expr), (expected), &why_), qPrintable(why_)); \
    } while (false)

}  // namespace tandem::test
