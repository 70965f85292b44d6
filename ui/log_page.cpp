#include "engine_bridge.hpp"
#include "pages.hpp"
#include "state_view.hpp"

#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QShortcut>
#include <QTableWidget>
#include <QVBoxLayout>

#include <set>

namespace tandem::ui {

LogPage::LogPage(const UiContext& context, QWidget* parent) : Page(context, parent) {
    auto* content = new QWidget(this);
    auto* layout = new QVBoxLayout(content);
    auto* head = new QHBoxLayout();
    auto* levelLabel = new QLabel(tr("&Level:"), content);
    m_level = new QComboBox(content);
    m_level->setObjectName(QStringLiteral("level"));
    // Index = core::EventLevel of the lowest level shown (the ledger keeps Info and above).
    m_level->addItem(tr("Everything"), 0);
    m_level->addItem(tr("Information and above"), 1);
    m_level->addItem(tr("Warnings and errors"), 2);
    m_level->addItem(tr("Errors only"), 3);
    m_level->setCurrentIndex(1);
    levelLabel->setBuddy(m_level);
    auto* searchLabel = new QLabel(tr("&Search:"), content);
    m_search = new QLineEdit(content);
    m_search->setObjectName(QStringLiteral("search"));
    m_search->setPlaceholderText(tr("text in the message"));
    m_search->setClearButtonEnabled(true);
    searchLabel->setBuddy(m_search);
    auto* copy = new QPushButton(tr("&Copy"), content);
    copy->setObjectName(QStringLiteral("copy"));
    copy->setToolTip(tr("Copy the selected lines, or every line shown (Ctrl+C)"));
    connect(copy, &QPushButton::clicked, this, &LogPage::copyToClipboard);
    head->addWidget(levelLabel);
    head->addWidget(m_level);
    head->addSpacing(12);
    head->addWidget(searchLabel);
    head->addWidget(m_search, 1);
    head->addWidget(copy);
    layout->addLayout(head);
    connect(m_level, &QComboBox::currentIndexChanged, this, [this] { refresh(); });
    connect(m_search, &QLineEdit::textChanged, this, [this] { refresh(); });

    m_table = makeRecordTable(QStringLiteral("events"), tr("Event log"),
                              {tr("Time"), tr("Level"), tr("Message")}, content);
    m_table->setWordWrap(false);
    auto* copyShortcut = new QShortcut(QKeySequence::Copy, m_table);
    copyShortcut->setContext(Qt::WidgetWithChildrenShortcut);
    connect(copyShortcut, &QShortcut::activated, this, &LogPage::copyToClipboard);
    layout->addWidget(m_table, 1);
    setContent(content);
}

void LogPage::setMinimumLevel(int level) {
    m_level->setCurrentIndex(std::clamp(level, 0, 3));
}
void LogPage::setSearch(const QString& text) {
    m_search->setText(text);
}

void LogPage::refresh() {
    core::Ledger* ledger = m_ctx.bridge->ledger();
    if (!ledger) {
        setEmpty(
            tr("No events yet. Tandem writes what it does here: registrations, work units, "
               "uploads, receipts and every problem it meets."));
        return;
    }
    core::EventFilter filter;
    filter.minLevel = static_cast<core::EventLevel>(m_level->currentData().toInt());
    filter.text = m_search->text().toStdString();
    filter.limit = 2000;
    auto events = ledger->events(filter);
    if (!events) {
        setEmpty(tr("The ledger cannot be read: %1")
                     .arg(QString::fromStdString(events.error().message)));
        return;
    }
    if (events->empty() && filter.text.empty() && filter.minLevel <= core::EventLevel::Info) {
        setEmpty(
            tr("No events yet. Tandem writes what it does here: registrations, work units, "
               "uploads, receipts and every problem it meets."));
        return;
    }
    setEmpty(QString());
    static const char* const kLevels[] = {QT_TR_NOOP("debug"), QT_TR_NOOP("info"),
                                          QT_TR_NOOP("warning"), QT_TR_NOOP("error")};
    m_table->setRowCount(static_cast<int>(events->size()));
    int row = 0;
    for (const auto& e : *events) {
        const int level = std::clamp(static_cast<int>(e.level), 0, 3);
        auto* time = new QTableWidgetItem(formatDateTime(e.atMs, zone()));
        auto* lev = new QTableWidgetItem(tr(kLevels[level]));
        auto* msg = new QTableWidgetItem(QString::fromStdString(e.message));
        msg->setToolTip(msg->text());
        if (level >= 2) {
            const QColor c = level == 3 ? QColor(0xc0, 0x1c, 0x28) : QColor(0xc6, 0x46, 0x00);
            lev->setForeground(c);
        }
        m_table->setItem(row, 0, time);
        m_table->setItem(row, 1, lev);
        m_table->setItem(row, 2, msg);
        ++row;
    }
    m_table->resizeColumnToContents(0);
    m_table->resizeColumnToContents(1);
}

void LogPage::copyToClipboard() {
    std::set<int> rows;
    for (const auto* item : m_table->selectedItems())
        rows.insert(item->row());
    if (rows.empty())
        for (int r = 0; r < m_table->rowCount(); ++r)
            rows.insert(r);
    QStringList lines;
    for (int r : rows) {
        QStringList cells;
        for (int c = 0; c < m_table->columnCount(); ++c)
            cells << (m_table->item(r, c) ? m_table->item(r, c)->text() : QString());
        lines << cells.join(QLatin1Char('\t'));
    }
    QApplication::clipboard()->setText(lines.join(QLatin1Char('\n')));
}

}  // namespace tandem::ui
