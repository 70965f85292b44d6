#include "cost_text.hpp"

#include "model_text.hpp"

#include "state_view.hpp"
#include "ui_prefs.hpp"

#include <QLocale>

namespace tandem::ui {

core::CostInputs costInputs(const CostFacts& f) {
    core::CostInputs in;
    in.parameterCount = f.run.parameterCount;
    in.sizing = {int64_t{f.run.batch} * f.run.seqLen, f.run.workUnitSeconds, f.run.innerStepsMin,
                 f.run.innerStepsMax};
    in.tokenBytes = std::max(1, f.run.tokenBytes);
    in.resultEncoding = net::encodingFromName(f.run.resultEncoding).value_or(net::kEncodingFp16);
    in.weightDeltas = parseWeightDeltaCodec(f.run.weightDeltas).value_or(WeightDeltaCodec::Off);
    if (f.speed.ok) {
        in.tokensPerSecond = f.speed.tokensPerSecond;
        in.setupSeconds = f.speed.setupSeconds;
        in.deviceWatts = f.speed.watts;
    }
    if (f.link.ok) {
        in.downMbitPerSecond = f.link.downMbitPerSecond;
        in.upMbitPerSecond = f.link.upMbitPerSecond;
        in.latencyMs = f.link.latencyMs;
    }
    in.hoursPerDay = f.hoursPerDay;
    in.dailyDownloadCapBytes = f.dailyDownloadCapBytes;
    in.dailyUploadCapBytes = f.dailyUploadCapBytes;
    in.pricePerKwh = f.pricePerKwh;
    return in;
}

namespace {
QString seconds(double s) {
    return formatDuration(static_cast<int64_t>(1000 * s + 0.5));
}
QString bytes(double b) {
    return formatBytes(static_cast<int64_t>(b));
}
}  // namespace

QString CostText::describe(const CostFacts& f) {
    const QLocale loc;
    const RunInfo& run = f.run;
    if (!run.ok || run.parameterCount <= 0)
        return tr("The run's model size is not known (%1), so the costs cannot be worked out "
                  "yet. Set limits below if your connection is metered.")
            .arg(run.error.isEmpty() ? tr("the coordinator did not answer")
                                     : run.error.toHtmlEscaped());
    QString text = tr("The run trains a %1.")
                       .arg((run.modelConfig.layers > 0 ? modelInWords(run.modelConfig)
                                                        : modelInWords(run.model))
                                .toHtmlEscaped());
    if (run.unitMemoryCpuBytes > 0)
        text += QStringLiteral(" ") +
                tr("Training a unit needs about <b>%1</b> of memory on a CPU, or %2 of GPU memory "
                   "and %3 of RAM on a GPU; a device with less is not given work.")
                    .arg(formatBytes(run.unitMemoryCpuBytes), formatBytes(run.unitMemoryGpuBytes),
                         formatBytes(run.unitMemoryHostBytes));
    if (run.innerStepsMax <= 0 || run.batch <= 0 || run.seqLen <= 0)
        return text + QStringLiteral("<br><br>") +
               tr("This coordinator does not say how it sizes work units (it is older than this "
                  "app), so the time and data per day cannot be worked out. Each unit downloads "
                  "at least %1 (the model's weights) and uploads %2.")
                   .arg(formatBytes(4 * run.parameterCount), formatBytes(2 * run.parameterCount));

    const core::CostEstimate c = core::estimateCosts(costInputs(f));
    if (!f.speed.ok)
        return text + QStringLiteral("<br><br>") +
               tr("Your device's training speed could not be measured (%1), so the time and data "
                  "per day cannot be worked out. A unit of the longest kind (%2 training steps) "
                  "downloads %3 and uploads %4.")
                   .arg(f.speed.error.toHtmlEscaped(), loc.toString(c.innerSteps),
                        formatBytes(c.downloadBytesPerUnit), formatBytes(c.uploadBytesPerUnit));

    text += QStringLiteral("<br><br>") +
            tr("Your device (%1) trains about %2 tokens a second, so the coordinator will give it "
               "work units of %3 training steps, each about <b>%4</b> of training. Each unit "
               "downloads %5 (the model's weights and its text) and uploads %6.")
                .arg(f.speed.device.toHtmlEscaped(),
                     loc.toString(static_cast<qlonglong>(f.speed.tokensPerSecond + 0.5)),
                     loc.toString(c.innerSteps), seconds(c.trainSecondsPerUnit),
                     formatBytes(c.downloadBytesPerUnit), formatBytes(c.uploadBytesPerUnit));
    if (f.link.ok) {
        text += QStringLiteral(" ") +
                (c.uploadSecondsPerUnit > c.secondsPerUnit - 1e-9
                     ? tr("At your measured speed a result takes <b>%1</b> to upload, longer "
                          "than a unit takes to train: your upload sets the pace.")
                           .arg(seconds(c.uploadSecondsPerUnit))
                     : tr("With your connection a unit takes about <b>%1</b> in all, %2 of it "
                          "downloading; its upload (%3) runs while the next unit trains.")
                           .arg(seconds(c.secondsPerUnit), seconds(c.downloadSecondsPerUnit),
                                seconds(c.uploadSecondsPerUnit)));
    } else {
        text += QStringLiteral(" ") + tr("The connection was not measured, so download and "
                                         "upload times are left out.");
    }
    text += QStringLiteral("<br><br>") +
            tr("Working %1 hours a day, that is about %2 units a day: <b>%3 down</b> and "
               "<b>%4 up</b> per day.")
                .arg(loc.toString(f.hoursPerDay, 'f', 0),
                     loc.toString(static_cast<qlonglong>(c.unitsPerDay + 0.5)),
                     bytes(c.downloadBytesPerDay), bytes(c.uploadBytesPerDay));
    if (c.capped)
        text += QStringLiteral(" ") + tr("Your daily caps keep it to that; without them it would "
                                         "be %1 units.")
                                          .arg(loc.toString(static_cast<qlonglong>(
                                              f.hoursPerDay * 3600 / c.secondsPerUnit + 0.5)));
    if (c.kwhPerDay <= 0)
        return text;
    const QString source =
        f.speed.wattsMeasured
            ? tr("measured on the GPU")
            : (f.speed.cpuThreads > 0
                   ? tr("an estimate for %1 CPU threads, not measured").arg(f.speed.cpuThreads)
                   : tr("the GPU's power limit; its sensor gave no reading"));
    text +=
        QStringLiteral("<br><br>") +
        tr("Training draws about %1 W (%2): about <b>%3 kWh a day</b>")
            .arg(loc.toString(f.speed.watts, 'f', 0), source, loc.toString(c.kwhPerDay, 'f', 2));
    text += c.costPerDay > 0
                ? tr(", which costs about <b>%1</b> a day at %2 per kWh.")
                      .arg(loc.toString(c.costPerDay, 'f', 2), loc.toString(f.pricePerKwh, 'f', 2))
                : tr(". Enter your electricity price to see what that costs.");
    return text;
}

QString CostText::perDay(const CostFacts& f) {
    if (!f.run.ok || f.run.parameterCount <= 0 || f.run.innerStepsMax <= 0)
        return tr("not known: the coordinator does not say how it sizes work units");
    if (!f.speed.ok)
        return tr("not known until this device's speed is measured (after its first work unit)");
    const core::CostEstimate c = core::estimateCosts(costInputs(f));
    const QLocale loc;
    QString line = tr("about %1 work units: %2 down, %3 up")
                       .arg(loc.toString(static_cast<qlonglong>(c.unitsPerDay + 0.5)),
                            bytes(c.downloadBytesPerDay), bytes(c.uploadBytesPerDay));
    if (c.kwhPerDay > 0)
        line += tr(", %1 kWh").arg(loc.toString(c.kwhPerDay, 'f', 2));
    if (c.costPerDay > 0)
        line += tr(" (%1)").arg(loc.toString(c.costPerDay, 'f', 2));
    if (c.capped)
        line += tr(", held to that by your daily caps");
    return line;
}

void rememberCostFacts(UiPrefs& prefs, const SpeedReport& speed, double hoursPerDay) {
    prefs.setNumber(QStringLiteral("costs/hoursPerDay"), hoursPerDay);
    if (!speed.ok)
        return;
    prefs.setText(QStringLiteral("speed/device"), speed.device);
    prefs.setNumber(QStringLiteral("speed/tokensPerSecond"), speed.tokensPerSecond);
    prefs.setNumber(QStringLiteral("speed/setupSeconds"), speed.setupSeconds);
    prefs.setNumber(QStringLiteral("speed/watts"), speed.watts);
    prefs.setFlag(QStringLiteral("speed/wattsMeasured"), speed.wattsMeasured);
    prefs.setNumber(QStringLiteral("speed/cpuThreads"), speed.cpuThreads);
}

CostFacts rememberedCostFacts(const UiPrefs& prefs) {
    CostFacts f;
    f.hoursPerDay = prefs.number(QStringLiteral("costs/hoursPerDay"), 24);
    f.speed.tokensPerSecond = prefs.number(QStringLiteral("speed/tokensPerSecond"));
    f.speed.ok = f.speed.tokensPerSecond > 0;
    f.speed.device = prefs.text(QStringLiteral("speed/device"));
    f.speed.setupSeconds = prefs.number(QStringLiteral("speed/setupSeconds"));
    f.speed.watts = prefs.number(QStringLiteral("speed/watts"));
    f.speed.wattsMeasured = prefs.flag(QStringLiteral("speed/wattsMeasured"));
    f.speed.cpuThreads = static_cast<int>(prefs.number(QStringLiteral("speed/cpuThreads")));
    f.link.downMbitPerSecond = prefs.number(QStringLiteral("bandwidth/downMbit"));
    f.link.upMbitPerSecond = prefs.number(QStringLiteral("bandwidth/upMbit"));
    f.link.latencyMs = prefs.number(QStringLiteral("bandwidth/latencyMs"));
    f.link.ok = f.link.downMbitPerSecond > 0 && f.link.upMbitPerSecond > 0;
    return f;
}

}  // namespace tandem::ui
