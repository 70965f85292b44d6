// tandem-bench-diloco's report: the summary over seeds, JSON and CSV.
#include "diloco_study.hpp"

#include "cpu_model.hpp"
#include "json_escape.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace tandem::bench {

std::vector<Summary> summarize(const std::vector<std::string>& configs,
                               const std::vector<Arm>& arms,
                               const std::vector<RunResult>& results) {
    std::vector<Summary> out;
    for (const std::string& c : configs) {
        for (const Arm& a : arms) {
            Summary s;
            s.configName = c;
            s.arm = a.name;
            std::vector<double> losses;
            for (const RunResult& r : results) {
                if (r.configName != c || r.arm != a.name)
                    continue;
                losses.push_back(r.finalLoss);
                s.bytesPerToken = r.bytesPerWorker / static_cast<double>(r.tokensPerWorker);
                s.tokensTotal = r.tokensTotal;
                s.wallSeconds += r.wallSeconds;
            }
            if (losses.empty())
                continue;
            s.seeds = static_cast<int>(losses.size());
            for (double l : losses)
                s.mean += l / static_cast<double>(losses.size());
            for (double l : losses)
                s.stddev += (l - s.mean) * (l - s.mean);
            s.stddev = losses.size() > 1 ? std::sqrt(s.stddev / (losses.size() - 1)) : 0.0;
            s.min = *std::min_element(losses.begin(), losses.end());
            s.max = *std::max_element(losses.begin(), losses.end());
            out.push_back(s);
        }
    }
    // Each arm against the best synchronous arm (its lr tuned) at the same tokens in all.
    for (Summary& s : out) {
        const Summary* best = nullptr;
        for (const Summary& x : out) {
            const auto arm = std::find_if(arms.begin(), arms.end(),
                                          [&](const Arm& a) { return a.name == x.arm; });
            if (arm != arms.end() && arm->sync && x.configName == s.configName &&
                x.tokensTotal == s.tokensTotal && (!best || x.mean < best->mean))
                best = &x;
        }
        s.vsSync = best ? s.mean / best->mean - 1.0 : std::nan("");
        s.vsSyncArm = best ? best->arm : "";
    }
    return out;
}

namespace {

bool writeJsonTo(const std::string& path, const Options& o, const std::string& cpu,
                 const std::vector<RunResult>& results, const std::vector<Summary>& summary,
                 size_t runsPlanned) {
    std::ofstream file(path);
    if (!file)
        return false;
    char buf[2048];
    std::snprintf(buf, sizeof buf, "{\n  \"runsDone\": %zu,\n  \"runsPlanned\": %zu,\n",
                  results.size(), runsPlanned);
    file << buf;
    std::snprintf(buf, sizeof buf,
                  "  \"benchmark\": \"diloco\",\n  \"cpu\": \"%s\",\n"
                  "  \"hardwareThreads\": %u,\n  \"workers\": %d,\n  \"batchPerWorker\": %d,\n"
                  "  \"outerLr\": %g,\n  \"outerMomentum\": %g,\n  \"int8Block\": %d,\n"
                  "  \"staleWeightFactor\": 0.5,\n  \"evalBatches\": %d,\n"
                  "  \"smoke\": %s,\n",
                  bench::jsonEscape(cpu).c_str(), std::thread::hardware_concurrency(), o.workers,
                  o.batch, o.outer.lr, o.outer.momentum, o.int8Block, o.evalBatches,
                  o.smoke ? "true" : "false");
    file << buf << "  \"summary\": [\n";
    for (size_t i = 0; i < summary.size(); ++i) {
        const Summary& s = summary[i];
        std::snprintf(buf, sizeof buf,
                      "    {\"config\": \"%s\", \"arm\": \"%s\", \"seeds\": %d, "
                      "\"finalLossMean\": %.6f, \"finalLossStd\": %.6f, \"finalLossMin\": %.6f, "
                      "\"finalLossMax\": %.6f, \"vsSync\": %s, \"vsSyncArm\": \"%s\", "
                      "\"tokensTotal\": %lld, "
                      "\"bytesPerWorkerPerToken\": %.6f, \"wallSeconds\": %.2f}%s\n",
                      bench::jsonEscape(s.configName).c_str(), bench::jsonEscape(s.arm).c_str(),
                      s.seeds, s.mean, s.stddev, s.min, s.max,
                      std::isfinite(s.vsSync) ? std::to_string(s.vsSync).c_str() : "null",
                      bench::jsonEscape(s.vsSyncArm).c_str(), static_cast<long long>(s.tokensTotal),
                      s.bytesPerToken, s.wallSeconds, i + 1 < summary.size() ? "," : "");
        file << buf;
    }
    file << "  ],\n  \"runs\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
        const RunResult& r = results[i];
        std::snprintf(
            buf, sizeof buf,
            "    {\"config\": \"%s\", \"model\": \"%s\", \"arm\": \"%s\", \"seed\": %d, "
            "\"sync\": %s, \"H\": %d, \"encoding\": \"%s\", \"dropRate\": %g, \"staleness\": %d, "
            "\"workers\": %d, \"batch\": %d, \"innerLr\": %g, "
            "\"parameters\": %lld, \"seqLen\": %d, \"tokensPerWorker\": %lld, "
            "\"tokensTotal\": %lld, "
            "\"bytesPerWorker\": %.0f, \"bytesPerWorkerPerToken\": %.6f, \"rounds\": %d, "
            "\"emptyRounds\": %d, \"droppedUploads\": %d, \"staleResults\": %d, "
            "\"gateRefused\": %d, \"gateDownWeighted\": %d, "
            "\"agreementMean\": %.4f, \"agreementLast\": %.4f, \"maxRise\": %.6g, "
            "\"finalLoss\": %.6f, \"finalLossHex\": \"%a\", \"lastTrainLoss\": %.6f, "
            "\"wallSeconds\": %.2f,\n     ",
            bench::jsonEscape(r.configName).c_str(), r.config.describe().c_str(),
            bench::jsonEscape(r.arm).c_str(), r.seed, r.sync ? "true" : "false", r.H,
            r.sync ? "fp32" : encodingName(r.encoding), r.dropRate, r.staleness, r.workers, r.batch,
            static_cast<double>(r.innerLr), static_cast<long long>(r.parameters), r.T,
            static_cast<long long>(r.tokensPerWorker), static_cast<long long>(r.tokensTotal),
            r.bytesPerWorker, r.bytesPerWorker / static_cast<double>(r.tokensPerWorker), r.rounds,
            r.emptyRounds, r.droppedUploads, r.staleResults, r.gateRefused, r.gateDownWeighted,
            r.agreementMean, r.agreementLast, r.maxRise, r.finalLoss, r.finalLoss, r.lastTrainLoss,
            r.wallSeconds);
        file << buf;
        if (r.stream.fragments > 0) {
            // Streaming arms: the schedule's first syncs (step, fragment) and the merge check.
            std::snprintf(buf, sizeof buf,
                          "\"stream\": {\"fragments\": %d, \"tau\": %d, \"mix\": %g, "
                          "\"syncs\": %lld, \"merges\": %lld, \"mergeChangedInside\": %lld, "
                          "\"mergeChangedOutside\": %lld, \"keptOwn\": %lld, ",
                          r.stream.fragments, r.stream.tau, static_cast<double>(r.stream.mix),
                          static_cast<long long>(r.stream.syncs),
                          static_cast<long long>(r.stream.merges),
                          static_cast<long long>(r.stream.changedInside),
                          static_cast<long long>(r.stream.changedOutside),
                          static_cast<long long>(r.stream.keptOwn));
            file << buf;
            if (r.stream.spread > 0) {
                std::snprintf(buf, sizeof buf,
                              "\"spread\": %g, \"quorum\": %d, \"carry\": %s, \"skipped\": %lld, "
                              "\"stepsMin\": %lld, \"stepsMax\": %lld, \"firstSyncs\": [",
                              r.stream.spread, r.stream.quorum, r.stream.carry ? "true" : "false",
                              static_cast<long long>(r.stream.skipped),
                              static_cast<long long>(r.stream.stepsMin),
                              static_cast<long long>(r.stream.stepsMax));
                file << buf;
            } else {
                file << "\"firstSyncs\": [";
            }
            for (size_t j = 0; j < r.stream.firstSyncs.size(); ++j)
                file << (j ? ", [" : "[") << r.stream.firstSyncs[j].first << ", "
                     << r.stream.firstSyncs[j].second << "]";
            file << "]},\n     ";
        }
        file << "\"curve\": [";
        for (size_t j = 0; j < r.curve.size(); ++j) {
            const CurvePoint& p = r.curve[j];
            std::snprintf(buf, sizeof buf,
                          "%s{\"step\": %lld, \"tokensPerWorker\": %lld, \"bytesPerWorker\": "
                          "%.0f, \"valLoss\": %.6f}",
                          j ? ", " : "", static_cast<long long>(p.step),
                          static_cast<long long>(p.tokensPerWorker), p.bytesPerWorker, p.valLoss);
            file << buf;
        }
        file << "]}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    file << "  ]\n}\n";
    file.close();
    return static_cast<bool>(file);
}

}  // namespace

// Written after every finished run: an interrupted study keeps what it measured.
bool writeJson(const std::string& path, const Options& o, const std::string& cpu,
               const std::vector<RunResult>& results, const std::vector<Summary>& summary,
               size_t runsPlanned) {
    const std::string temporary = path + ".tmp";
    if (!writeJsonTo(temporary, o, cpu, results, summary, runsPlanned))
        return false;
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    return !ec;
}

bool writeCsv(const std::string& path, const std::vector<RunResult>& results) {
    std::ofstream file(path);
    if (!file)
        return false;
    file << "config,arm,seed,step,tokens_per_worker,bytes_per_worker,val_loss\n";
    char buf[512];
    for (const RunResult& r : results) {
        for (const CurvePoint& p : r.curve) {
            std::snprintf(buf, sizeof buf, "%s,%s,%d,%lld,%lld,%.0f,%.6f\n", r.configName.c_str(),
                          r.arm.c_str(), r.seed, static_cast<long long>(p.step),
                          static_cast<long long>(p.tokensPerWorker), p.bytesPerWorker, p.valLoss);
            file << buf;
        }
    }
    return static_cast<bool>(file);
}

}  // namespace tandem::bench
