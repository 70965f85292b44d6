// The upload queue (core/upload_queue.hpp) alone, with a scripted runner: jobs run one at a
// time, in order, on the queue's own thread; Hold and RetryAt keep the front job in front (a later
// result never overtakes it), RetryAt by the clock, not real time; a job the runner did not remove
// runs again at once; push wakes an idle thread; stop() waits for the running job, ends the thread
// and keeps the jobs not run (they stay on disk for the next start), as does a runner's Stop.
#include "upload_queue.hpp"

#include <QtTest>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

using namespace tandem;
using namespace tandem::core;
using Verdict = UploadQueue::Verdict;

namespace {

template <class F>
bool eventually(F f, int limitMs = 10000) {
    for (int waited = 0; waited < limitMs; waited += 2) {
        if (f())
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return f();
}

PendingResult job(int64_t id) {
    PendingResult p;
    p.workUnitId = id;
    return p;
}

// A queue with its own mutex, condition variable and settable clock, and a log of the runs.
struct Fixture {
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<int64_t> clockMs{1000};
    std::mutex logMu;
    std::vector<int64_t> runs;
    std::vector<std::thread::id> threads;
    UploadQueue queue;

    explicit Fixture(int64_t pollMs = 5)
        : queue(
              mu, cv, [this] { return clockMs.load(); }, pollMs) {}

    void record(const PendingResult& p) {
        std::lock_guard lock(logMu);
        runs.push_back(p.workUnitId);
        threads.push_back(std::this_thread::get_id());
    }
    std::vector<int64_t> ran() {
        std::lock_guard lock(logMu);
        return runs;
    }
    size_t size() {
        std::lock_guard lock(mu);
        return queue.sizeLocked();
    }
    // As the engine's runner settles a job: removed under the mutex.
    Verdict settle(const PendingResult& p) {
        std::lock_guard lock(mu);
        queue.popLocked(p.workUnitId);
        return Verdict::now();
    }
};

}  // namespace

class TestUploadQueue : public QObject {
    Q_OBJECT

  private slots:
    void jobsRunInOrderOnItsThread() {
        Fixture f;
        for (int64_t id : {1, 2, 3, 4, 5})
            f.queue.push(job(id));
        f.queue.start([&](const PendingResult& p) {
            f.record(p);
            return f.settle(p);
        });
        f.queue.push(job(6));
        QVERIFY(eventually([&] { return f.ran().size() == 6; }));
        QCOMPARE(f.ran(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
        QCOMPARE(f.size(), size_t{0});
        std::lock_guard lock(f.logMu);
        for (const auto& t : f.threads) {
            QVERIFY(t != std::this_thread::get_id());
            QVERIFY(t == f.threads.front());
        }
    }

    void holdKeepsTheFrontInFront() {
        Fixture f;
        f.queue.push(job(1));
        f.queue.push(job(2));
        int holds = 0;
        f.queue.start([&](const PendingResult& p) {
            f.record(p);
            if (p.workUnitId == 1 && holds < 3) {
                ++holds;
                return Verdict::hold();  // the upload cap holds it
            }
            return f.settle(p);
        });
        QVERIFY(eventually([&] { return f.ran().size() == 5; }));
        QCOMPARE(f.ran(), (std::vector<int64_t>{1, 1, 1, 1, 2}));
    }

    void retryWaitsForTheClock() {
        Fixture f;
        f.queue.push(job(1));
        f.queue.push(job(2));
        std::atomic<int> failures{0};
        f.queue.start([&](const PendingResult& p) {
            f.record(p);
            if (p.workUnitId == 1 && failures.load() == 0) {
                ++failures;
                return Verdict::retryAt(f.clockMs.load() + 5000);  // a transient failure
            }
            return f.settle(p);
        });
        QVERIFY(eventually([&] { return failures.load() == 1; }));
        std::this_thread::sleep_for(std::chrono::milliseconds(60));  // many polls of real time
        QCOMPARE(f.ran(), (std::vector<int64_t>{1}));                // job 2 waits behind it
        f.clockMs += 4999;
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        QCOMPARE(f.ran(), (std::vector<int64_t>{1}));
        f.clockMs += 1;
        QVERIFY(eventually([&] { return f.ran().size() == 3; }));
        QCOMPARE(f.ran(), (std::vector<int64_t>{1, 1, 2}));
        QCOMPARE(f.size(), size_t{0});
    }

    void jobNotRemovedRunsAgainAtOnce() {
        Fixture f(5000);  // a long poll: running again must not wait for it
        f.queue.push(job(1));
        std::atomic<int> tries{0};
        f.queue.start([&](const PendingResult& p) {
            f.record(p);
            if (++tries == 1)
                return Verdict::now();  // e.g. the receipt could not be stored: upload again
            return f.settle(p);
        });
        QVERIFY(eventually([&] { return f.ran().size() == 2; }, 2000));
        QCOMPARE(f.size(), size_t{0});
    }

    void pushWakesTheIdleThread() {
        Fixture f(5000);
        f.queue.start([&](const PendingResult& p) {
            f.record(p);
            return f.settle(p);
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // asleep on an empty queue
        const auto t0 = std::chrono::steady_clock::now();
        f.queue.push(job(7));
        QVERIFY(eventually([&] { return f.ran().size() == 1; }, 2000));
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2000));
    }

    void frontAndPopOnlyTouchTheNamedFrontJob() {
        Fixture f;
        f.queue.push(job(1));
        f.queue.push(job(2));
        std::lock_guard lock(f.mu);
        QVERIFY(f.queue.frontLocked(2) == nullptr);
        PendingResult* front = f.queue.frontLocked(1);
        QVERIFY(front);
        front->stillWantedChecked = true;
        f.queue.popLocked(2);  // not the front: nothing removed
        QCOMPARE(f.queue.sizeLocked(), size_t{2});
        QVERIFY(f.queue.frontLocked(1)->stillWantedChecked);
        f.queue.popLocked(1);
        QCOMPARE(f.queue.sizeLocked(), size_t{1});
        QVERIFY(f.queue.frontLocked(2) && !f.queue.frontLocked(2)->stillWantedChecked);
    }

    void stopWaitsForTheRunningJobAndKeepsTheRest() {
        Fixture f;
        for (int64_t id : {1, 2, 3})
            f.queue.push(job(id));
        std::promise<void> release;
        std::shared_future<void> released = release.get_future().share();
        std::atomic<bool> inJob{false}, sawStop{false};
        f.queue.start([&](const PendingResult& p) {
            f.record(p);
            inJob = true;
            released.wait();  // an upload in progress
            {
                std::lock_guard lock(f.mu);
                sawStop = f.queue.stopRequestedLocked();  // the upload's cancel check
            }
            return f.settle(p);
        });
        QVERIFY(eventually([&] { return inJob.load(); }));
        auto stopped = std::async(std::launch::async, [&] { f.queue.stop(); });
        QVERIFY(stopped.wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout);
        {
            std::lock_guard lock(f.mu);
            QVERIFY(f.queue.stopRequestedLocked());
        }
        release.set_value();
        QVERIFY(stopped.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
        QVERIFY(sawStop.load());
        QCOMPARE(f.ran(), (std::vector<int64_t>{1}));
        QCOMPARE(f.size(), size_t{2});  // not drained: they go out at the next start
        f.queue.stop();                 // again: nothing to do
    }

    void runnerStopEndsTheThread() {
        Fixture f;
        f.queue.push(job(1));
        f.queue.start([&](const PendingResult& p) {
            f.record(p);
            return Verdict::stop();  // e.g. the engine crashed (tests)
        });
        QVERIFY(eventually([&] { return f.ran().size() == 1; }));
        f.queue.push(job(2));
        std::this_thread::sleep_for(std::chrono::milliseconds(40));
        QCOMPARE(f.ran(), (std::vector<int64_t>{1}));
        QCOMPARE(f.size(), size_t{2});
        auto stopped = std::async(std::launch::async, [&] { f.queue.stop(); });
        QVERIFY(stopped.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    }

    void destructorStopsARunningQueue() {
        std::atomic<int> runs{0};
        auto done = std::async(std::launch::async, [&] {
            Fixture f;
            f.queue.push(job(1));
            f.queue.start([&](const PendingResult&) {
                ++runs;
                return Verdict::hold();  // never settles
            });
            eventually([&] { return runs.load() > 2; });
        });
        QVERIFY(done.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
        QVERIFY(runs.load() > 2);
    }
};

QTEST_APPLESS_MAIN(TestUploadQueue)
#include "test_upload_queue.moc"
