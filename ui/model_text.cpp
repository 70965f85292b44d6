#include "model_text.hpp"

#include <QCoreApplication>
#include <QLocale>

namespace tandem::ui {

QString modelInWords(const ModelConfig& config) {
    const double p = static_cast<double>(config.unpaddedParameterCount());
    const QLocale loc;
    // Two significant digits: 0.4 million, 12 million, 124 million, 1.6 billion.
    auto amount = [&](double v) { return loc.toString(v, 'f', v < 10 ? 1 : 0); };
    QString size;
    if (p >= 1e9)
        size = QCoreApplication::translate("tandem::ui::modelInWords", "%1 billion parameters")
                   .arg(amount(p / 1e9));
    else if (p >= 1e5)
        size = QCoreApplication::translate("tandem::ui::modelInWords", "%1 million parameters")
                   .arg(amount(p / 1e6));
    else
        size = QCoreApplication::translate("tandem::ui::modelInWords", "%1 parameters")
                   .arg(loc.toString(qlonglong(p)));
    return QCoreApplication::translate("tandem::ui::modelInWords", "%1-layer model")
               .arg(config.layers) +
           QStringLiteral(", ") + size;
}

QString modelInWords(const QString& described) {
    QString text = described.trimmed();
    text.replace(QLatin1Char(' '), QLatin1Char(','));
    auto config = ModelConfig::parse(text.toStdString());
    if (!config || !config->validate())
        return described;
    return modelInWords(*config);
}

}  // namespace tandem::ui
