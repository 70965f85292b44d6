// GPU detection: the inventory is consistent whatever the machine has, and a machine without a
// usable GPU gets a reason in words, not a crash.
#include "cuda/cuda_backend.hpp"
#include "cuda/devices.hpp"

#include <QTest>

using namespace tandem;

class TestGpuDevices : public QObject {
    Q_OBJECT

  private slots:
    void versionsAndLanes() {
        QCOMPARE(formatCudaVersion(12040), std::string("12.4"));
        QCOMPARE(formatCudaVersion(13000), std::string("13.0"));
        QCOMPARE(fp32LanesPerSm(8, 0), 64);
        QCOMPARE(fp32LanesPerSm(8, 6), 128);
        QCOMPARE(fp32LanesPerSm(7, 5), 64);
        QCOMPARE(fp32LanesPerSm(9, 0), 128);
        QCOMPARE(fp32LanesPerSm(6, 1), 0);
    }

    void inventoryIsConsistent() {
        const GpuInventory gpus = detectGpus();
        qInfo("driver %s (CUDA %s), runtime CUDA %s, NVML %s, %d device(s); %s",
              gpus.driverVersion.c_str(), formatCudaVersion(gpus.driverCudaVersion).c_str(),
              formatCudaVersion(gpus.runtimeCudaVersion).c_str(), gpus.nvmlLoaded ? "yes" : "no",
              int(gpus.devices.size()), gpus.usable() ? "usable" : gpus.unavailableReason.c_str());
        if (cudaBackendBuilt())
            QVERIFY(gpus.runtimeCudaVersion > 0);
        if (!gpus.usable()) {
            // The reason is a sentence for the device list, and the backend says the same.
            QVERIFY(gpus.unavailableReason.size() > 10);
            auto backend = makeCudaBackend(0);
            QVERIFY(!backend.ok());
            QVERIFY(!backend.error().message.empty());
            qInfo("makeCudaBackend(0): %s", backend.error().message.c_str());
            return;
        }
        QVERIFY(!gpus.devices.empty());
        for (const GpuDevice& d : gpus.devices) {
            QVERIFY(!d.name.empty());
            QVERIFY(d.totalMemoryBytes > 0 && d.freeMemoryBytes <= d.totalMemoryBytes);
            QVERIFY(d.smCount > 0 && d.computeMajor >= 3);
            QVERIFY(d.peakFp32Flops > 1e12);
            if (d.temperatureC != -1)
                QVERIFY(d.temperatureC > 0 && d.temperatureC < 120);
            if (d.utilizationPercent != -1)
                QVERIFY(d.utilizationPercent <= 100);
        }
    }

    void badDeviceIndex() {
        auto backend = makeCudaBackend(-1);
        QVERIFY(!backend.ok());
        QVERIFY(backend.error().message.find("-1") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestGpuDevices)
#include "test_gpu_devices.moc"
