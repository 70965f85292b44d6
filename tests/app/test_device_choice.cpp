// The device choice of tandem-worker and the desktop app (app/device_choice.hpp) on given facts:
// auto takes a usable GPU or says why it uses the CPU; cpu is the CPU; cuda:N that cannot be used
// is an error for the worker and the CPU with a reason for the desktop; bad names are refused.
#include "device_choice.hpp"

#include <QtTest>

using namespace tandem;
using namespace tandem::app;

namespace {

core::HardwareInventory sampleCpu() {
    core::HardwareInventory cpu;
    cpu.cpuModel = "Test CPU 9000";
    cpu.logicalCores = 8;
    cpu.memoryTotalBytes = 16'000'000'000;
    cpu.memoryAvailableBytes = 9'000'000'000;
    cpu.osName = "Debian GNU/Linux 12 (bookworm)";
    return cpu;
}

GpuDevice sampleGpu(int index, int major = 8, int minor = 6) {
    GpuDevice g;
    g.index = index;
    g.name = "NVIDIA Test " + std::to_string(index);
    g.totalMemoryBytes = 24'000'000'000;
    g.computeMajor = major;
    g.computeMinor = minor;
    g.supported = major * 10 + minor >= 75;
    return g;
}

DeviceFacts withGpus(std::vector<GpuDevice> gpus) {
    DeviceFacts f;
    f.cudaBuilt = true;
    f.gpus.devices = std::move(gpus);
    bool anySupported = false;
    for (const auto& g : f.gpus.devices)
        anySupported = anySupported || g.supported;
    if (!anySupported)
        f.gpus.unavailableReason = f.gpus.devices.empty() ? "no NVIDIA driver found"
                                                          : "no GPU with compute capability 7.5";
    f.cpu = sampleCpu();
    return f;
}

const std::string kCpuSummary =
    "Test CPU 9000, 8 threads, 16 GB RAM, Debian GNU/Linux 12 (bookworm)";

}  // namespace

class TestDeviceChoice : public QObject {
    Q_OBJECT
  private slots:
    void autoTakesAUsableGpu() {
        for (const std::string wanted : {"auto", "cuda", "cuda:0"}) {
            auto c = decideDevice(wanted, 4, UnavailableDevice::Fail, withGpus({sampleGpu(0)}));
            QVERIFY2(c.ok(), wanted.c_str());
            QCOMPARE(c->device, std::string("cuda:0"));
            QCOMPARE(c->gpuIndex, 0);
            QCOMPARE(c->description, std::string("cuda:0 NVIDIA Test 0"));
            QCOMPARE(c->memoryBytes, int64_t{24'000'000'000});
            QCOMPARE(c->hardwareSummary, "cuda:0 NVIDIA Test 0; " + kCpuSummary);
            QVERIFY(c->cpuReason.empty());
        }
        auto second = decideDevice("cuda:1", 4, UnavailableDevice::Fail,
                                   withGpus({sampleGpu(0), sampleGpu(1)}));
        QVERIFY(second.ok());
        QCOMPARE(second->device, std::string("cuda:1"));
        QCOMPARE(second->gpuIndex, 1);
    }

    void autoFallsBackToTheCpuSayingWhy() {
        DeviceFacts noBuild = withGpus({sampleGpu(0)});
        noBuild.cudaBuilt = false;
        auto c = decideDevice("auto", 4, UnavailableDevice::Fail, noBuild);
        QVERIFY(c.ok());
        QCOMPARE(c->device, std::string("cpu"));
        QCOMPARE(c->gpuIndex, -1);
        QCOMPARE(c->cpuReason, std::string("this build has no CUDA backend"));
        QCOMPARE(c->description, std::string("cpu Test CPU 9000 (4 threads)"));
        QCOMPARE(c->memoryBytes, int64_t{9'000'000'000});
        QCOMPARE(c->hardwareSummary, kCpuSummary);

        c = decideDevice("auto", 4, UnavailableDevice::Fail, withGpus({}));
        QVERIFY(c.ok());
        QCOMPARE(c->device, std::string("cpu"));
        QCOMPARE(c->cpuReason, std::string("no NVIDIA driver found"));

        c = decideDevice("auto", 4, UnavailableDevice::Fail, withGpus({sampleGpu(0, 6, 1)}));
        QVERIFY(c.ok());
        QCOMPARE(c->device, std::string("cpu"));
        QCOMPARE(c->cpuReason, std::string("no GPU with compute capability 7.5"));
    }

    void cpuIsTheCpuEvenWithAGpu() {
        auto c = decideDevice("cpu", 2, UnavailableDevice::Fail, withGpus({sampleGpu(0)}));
        QVERIFY(c.ok());
        QCOMPARE(c->device, std::string("cpu"));
        QCOMPARE(c->gpuIndex, -1);
        QVERIFY(c->cpuReason.empty());
        QCOMPARE(c->description, std::string("cpu Test CPU 9000 (2 threads)"));
        QCOMPARE(c->hardwareSummary, kCpuSummary);
    }

    void aNamedGpuThatCannotBeUsed() {
        struct Case {
            const char* wanted;
            DeviceFacts facts;
            const char* why;
        };
        DeviceFacts noBuild = withGpus({sampleGpu(0)});
        noBuild.cudaBuilt = false;
        const Case cases[] = {
            {"cuda:1", withGpus({sampleGpu(0)}), "there is no CUDA device 1 (found 1)"},
            {"cuda:0", withGpus({sampleGpu(0, 6, 1)}), "no GPU with compute capability 7.5"},
            {"cuda:1", withGpus({sampleGpu(0), sampleGpu(1, 7, 0)}),
             "NVIDIA Test 1 has compute capability 7.0; this build needs 7.5 or newer"},
            {"cuda:0", noBuild, "this build has no CUDA backend"},
            {"cuda", withGpus({}), "no NVIDIA driver found"},
        };
        for (const Case& k : cases) {
            // The worker: an error that names the device and the reason.
            auto failed = decideDevice(k.wanted, 4, UnavailableDevice::Fail, k.facts);
            QVERIFY2(!failed.ok(), k.wanted);
            QCOMPARE(failed.error().kind, DeviceError::Kind::Unavailable);
            QCOMPARE(failed.error().message, std::string("cannot use ") + k.wanted + ": " + k.why);
            // The desktop: the CPU, with the reason for its event log.
            auto fallback = decideDevice(k.wanted, 4, UnavailableDevice::FallBackToCpu, k.facts);
            QVERIFY2(fallback.ok(), k.wanted);
            QCOMPARE(fallback->device, std::string("cpu"));
            QCOMPARE(fallback->cpuReason, std::string(k.why));
            QCOMPARE(fallback->hardwareSummary, kCpuSummary);
        }
    }

    void badNamesAreRefused() {
        for (const char* wanted : {"gpu", "", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1025",
                                   "cuda:0x", "cuda0", "auto "}) {
            auto c = decideDevice(wanted, 4, UnavailableDevice::Fail, withGpus({sampleGpu(0)}));
            QVERIFY2(!c.ok(), wanted);
            QCOMPARE(c.error().kind, DeviceError::Kind::BadValue);
            QCOMPARE(c.error().message,
                     std::string("--device expects auto, cpu or cuda:N, found '") + wanted + "'");
            auto fallback =
                decideDevice(wanted, 4, UnavailableDevice::FallBackToCpu, withGpus({sampleGpu(0)}));
            QVERIFY2(fallback.ok(), wanted);
            QCOMPARE(fallback->device, std::string("cpu"));
            QVERIFY(!fallback->cpuReason.empty());
        }
        // The largest index accepted.
        auto last = decideDevice("cuda:1024", 4, UnavailableDevice::Fail, withGpus({}));
        QCOMPARE(last.error().kind, DeviceError::Kind::Unavailable);
    }

    void withoutACpuInventory() {
        DeviceFacts f = withGpus({sampleGpu(0)});
        f.cpu.reset();
        auto cpu = decideDevice("cpu", 4, UnavailableDevice::Fail, f);
        QVERIFY(cpu.ok());
        QCOMPARE(cpu->description, std::string("cpu"));
        QCOMPARE(cpu->memoryBytes, int64_t{0});
        QVERIFY(cpu->hardwareSummary.empty());
        auto gpu = decideDevice("auto", 4, UnavailableDevice::Fail, f);
        QVERIFY(gpu.ok());
        QCOMPARE(gpu->hardwareSummary, std::string("cuda:0 NVIDIA Test 0; "));
    }

    void thisMachinesCpu() {
        // The real probe: "cpu" never looks at the GPUs and always succeeds.
        auto c = chooseDevice("cpu", 3, UnavailableDevice::Fail);
        QVERIFY(c.ok());
        QCOMPARE(c->device, std::string("cpu"));
        QVERIFY(c->description.rfind("cpu", 0) == 0);
        QVERIFY(c->description == "cpu" || c->description.find("(3 threads)") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestDeviceChoice)
#include "test_device_choice.moc"
