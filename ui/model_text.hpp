// A model's size in words a donor understands: "2-layer model, 0.4 million parameters" instead
// of "L=2 NH=4 C=128 T=64 V=256".
#pragma once

#include "model_config.hpp"

#include <QString>

namespace tandem::ui {

QString modelInWords(const ModelConfig& config);
// From ModelConfig::describe()'s text ("L=2 NH=4 C=128 T=64 V=256", commas too); a text that is
// no model description comes back as it is.
QString modelInWords(const QString& described);

}  // namespace tandem::ui
