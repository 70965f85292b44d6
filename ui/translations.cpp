#include "translations.hpp"

#include <QCoreApplication>
#include <QLibraryInfo>
#include <QTranslator>

namespace tandem::ui {

QList<QTranslator*> installTranslations(const QLocale& locale) {
    QList<QTranslator*> installed;
    QCoreApplication* app = QCoreApplication::instance();
    if (!app)
        return installed;
    auto tryLoad = [&](const QString& name, const QString& directory) {
        auto* t = new QTranslator(app);
        // Tries name_de_DE.qm, name_de.qm, ... for each of the locale's UI languages.
        if (t->load(locale, name, QStringLiteral("_"), directory) &&
            QCoreApplication::installTranslator(t)) {
            installed << t;
        } else {
            delete t;
        }
    };
    tryLoad(QStringLiteral("tandem"), QStringLiteral(":/i18n"));
    tryLoad(QStringLiteral("qtbase"), QLibraryInfo::path(QLibraryInfo::TranslationsPath));
    return installed;
}

}  // namespace tandem::ui
