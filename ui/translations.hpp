// Translations: Tandem's own strings (ui/translations/tandem_<lang>.ts, compiled and embedded as
// :/i18n/tandem_<lang>.qm) and Qt's (qtbase_<lang>.qm from Qt's translations directory, when the
// system has them: standard buttons, context menus).
#pragma once

#include <QList>
#include <QLocale>

class QTranslator;

namespace tandem::ui {

// Installs on the application the translators that exist for `locale` (none for English);
// they belong to the application object. Returns them, Tandem's first.
QList<QTranslator*> installTranslations(const QLocale& locale);

}  // namespace tandem::ui
