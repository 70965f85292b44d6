// The public run page (GET / and /runs/{run}): what is trained, how far it got, the validation
// loss as an inline SVG chart, the newest sample and the leaderboard, as plain HTML and CSS (no
// script, nothing fetched from elsewhere, readable on a phone). Rendered from a PublicRunView,
// which the coordinator gathers from its cached totals (public_face.cpp); everything that came
// from a donor or the model goes through htmlEscape.
#pragma once

#include "donor_profile.hpp"
#include "model_config.hpp"
#include "protocol.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::coord {

struct LossPoint {
    int64_t round = 0;
    double loss = 0;
};

struct PublicRunView {
    int64_t runId = 0;
    ModelConfig model;
    int64_t parameters = 0;
    std::string dataKind;     // bytes, sentencepiece or llmc (run_data.hpp)
    int64_t trainTokens = 0;  // tokens of the training data
    int64_t tokensSoFar = 0;  // accepted into rounds
    int64_t roundsClosed = 0;
    std::vector<LossPoint> losses;  // closed rounds with a validation loss, oldest first
    std::optional<net::SampleSummary> sample;
    int64_t activeDonors = 0;    // clients training a unit with a live heartbeat
    int64_t tokensLastHour = 0;  // accepted into rounds closed in the last hour
    net::Leaderboard board;
    int64_t builtUnix = 0;
};

// & < > " ' as character references; bytes that are not well-formed UTF-8 as U+FFFD.
std::string htmlEscape(std::string_view text);

// 1234567 -> "1,234,567" below ten million, "12.3 million", "1.23 billion" above.
std::string countInWords(int64_t n);

// The validation loss by round as an inline <svg id="loss-chart"> with axes and labels; a
// paragraph saying so when there is no point yet.
std::string lossChartSvg(std::span<const LossPoint> points);

std::string renderRunPage(const PublicRunView& view);

}  // namespace tandem::coord
