#include "ui_prefs.hpp"

namespace tandem::ui {

UiPrefs::UiPrefs(const QString& file)
    : m_settings(std::make_unique<QSettings>(file, QSettings::IniFormat)) {}

bool UiPrefs::flag(const QString& key) const {
    return m_settings->value(key, false).toBool();
}
void UiPrefs::setFlag(const QString& key, bool on) {
    m_settings->setValue(key, on);
    m_settings->sync();
}
double UiPrefs::number(const QString& key, double fallback) const {
    return m_settings->value(key, fallback).toDouble();
}
void UiPrefs::setNumber(const QString& key, double value) {
    m_settings->setValue(key, value);
    m_settings->sync();
}
QByteArray UiPrefs::bytes(const QString& key) const {
    return m_settings->value(key).toByteArray();
}
void UiPrefs::setBytes(const QString& key, const QByteArray& value) {
    m_settings->setValue(key, value);
    m_settings->sync();
}
QString UiPrefs::text(const QString& key) const {
    return m_settings->value(key).toString();
}
void UiPrefs::setText(const QString& key, const QString& value) {
    m_settings->setValue(key, value);
    m_settings->sync();
}

}  // namespace tandem::ui
