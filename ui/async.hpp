// Runs a blocking call (a Services query) on the global thread pool and hands its result to a
// callback on the GUI thread, unless the receiving widget is gone by then.
#pragma once

#include <QCoreApplication>
#include <QMetaObject>
#include <QObject>
#include <QPointer>
#include <QThreadPool>

#include <functional>
#include <memory>

namespace tandem::ui {

template <class T>
void runAsync(QObject* receiver, std::function<T()> work, std::function<void(T)> done) {
    QPointer<QObject> guard(receiver);
    QThreadPool::globalInstance()->start(
        [guard, work = std::move(work), done = std::move(done)]() mutable {
            auto result = std::make_shared<T>(work());
            // Delivered through the application object (it outlives every widget); the guard is
            // read on the GUI thread only.
            QMetaObject::invokeMethod(
                QCoreApplication::instance(),
                [guard, result, done] {
                    if (guard)
                        done(std::move(*result));
                },
                Qt::QueuedConnection);
        });
}

}  // namespace tandem::ui
