// GET /v1/status and GET /v1/runs/{run}/samples: the run's status and what its model writes.
#include "protocol.hpp"

#include "protocol_json.hpp"
#include "result_format.hpp"

namespace tandem::net {

using namespace protocol_json;

namespace {

json sampleToJson(const SampleSummary& s) {
    return {{"version", s.version}, {"prompt", s.prompt}, {"text", s.text}};
}

}  // namespace

std::string samplesToJson(const std::vector<SampleSummary>& samples) {
    json list = json::array();
    for (const auto& s : samples)
        list.push_back(sampleToJson(s));
    return json{{"samples", list}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string RunStatus::toJson() const {
    json history_ = json::array();
    for (const auto& h : history) {
        history_.push_back({{"round", h.round},
                            {"val_loss", h.valLoss ? json(*h.valLoss) : json(nullptr)},
                            {"contributors", h.contributors},
                            {"tokens", h.tokens}});
    }
    json out{{"run_id", runId},
             {"round", round},
             {"model", modelToJson(model)},
             {"active_workers", activeWorkers},
             {"total_tokens", totalTokens},
             {"work_unit_seconds", workUnitSeconds},
             {"batch", batch},
             {"seq_len", seqLen},
             {"inner_steps_min", innerStepsMin},
             {"inner_steps_max", innerStepsMax},
             {"token_bytes", tokenBytes},
             {"history", history_}};
    if (!resultEncoding.empty())
        out["result_encoding"] = resultEncoding;
    if (!weightDeltas.empty())
        out["weight_deltas"] = weightDeltas;
    if (latestExport)
        out["latest_export"] = {{"path", latestExport->path},
                                {"format", latestExport->format},
                                {"version", latestExport->version},
                                {"exported_unix", latestExport->exportedUnix}};
    if (latestSample)
        out["latest_sample"] = sampleToJson(*latestSample);
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

Expected<RunStatus> RunStatus::fromJson(std::string_view text) {
    auto j = parseObject(text, "status");
    if (!j)
        return j.error();
    Reader r(*j, "status");
    RunStatus s;
    s.runId = r.integer("run_id", 1, kMaxI64);
    s.round = r.integer("round", 0, kMaxI64);
    s.model = modelFromJson(r, "model");
    s.activeWorkers = static_cast<int>(r.integer("active_workers", 0, 1 << 30));
    s.totalTokens = r.integer("total_tokens", 0, kMaxI64);
    if (j->contains("work_unit_seconds"))
        s.workUnitSeconds = static_cast<int>(r.integer("work_unit_seconds", 0, 86400 * 365));
    if (j->contains("batch"))  // absent from older coordinators
        s.batch = static_cast<int>(r.integer("batch", 0, 1 << 20));
    if (j->contains("seq_len"))
        s.seqLen = static_cast<int>(r.integer("seq_len", 0, 1 << 20));
    if (j->contains("inner_steps_max")) {  // absent from coordinators before 0.1.0's costs
        s.innerStepsMin = static_cast<int>(r.integer("inner_steps_min", 0, 1 << 30));
        s.innerStepsMax = static_cast<int>(r.integer("inner_steps_max", 0, 1 << 30));
        s.tokenBytes = static_cast<int>(r.integer("token_bytes", 0, 4));
    }
    // Absent from coordinators before protocol 5; an unknown name is refused, not guessed at.
    if (j->contains("result_encoding"))
        s.resultEncoding = r.string("result_encoding", 1, 16);
    if (j->contains("weight_deltas"))
        s.weightDeltas = r.string("weight_deltas", 1, 16);
    if (!r.failed() && !s.resultEncoding.empty() && !encodingFromName(s.resultEncoding))
        return makeError("status: unknown result_encoding '" + s.resultEncoding + "'");
    if (!r.failed() && !s.weightDeltas.empty() && s.weightDeltas != "off" &&
        s.weightDeltas != "fp16" && s.weightDeltas != "int8")
        return makeError("status: unknown weight_deltas '" + s.weightDeltas + "'");
    if (const json* h = r.array("history")) {
        for (size_t i = 0; i < h->size() && !r.failed(); ++i) {
            const json& e = (*h)[i];
            if (!e.is_object()) {
                r.fail("history entry " + std::to_string(i) + " is not an object");
                break;
            }
            Reader er(e, "status history entry " + std::to_string(i));
            RoundSummary rs;
            rs.round = er.integer("round", 0, kMaxI64);
            rs.valLoss = er.optionalNumber("val_loss");
            rs.contributors = static_cast<int>(er.integer("contributors", 0, 1 << 30));
            rs.tokens = er.integer("tokens", 0, kMaxI64);
            if (er.failed())
                r.fail(er.error().message);
            s.history.push_back(rs);
        }
    }
    if (const json* e = r.optionalObject("latest_export")) {
        Reader er(*e, "status latest_export");
        ExportInfo x;
        x.path = er.string("path", 1, 4096);
        x.format = er.string("format", 1, 32);
        x.version = er.integer("version", 0, kMaxI64);
        x.exportedUnix = er.integer("exported_unix", 0, kMaxI64);
        if (er.failed())
            r.fail(er.error().message);
        s.latestExport = x;
    }
    if (const json* ls = r.optionalObject("latest_sample")) {
        Reader sr(*ls, "status latest_sample");
        SampleSummary sample;
        sample.version = sr.integer("version", 0, kMaxI64);
        sample.prompt = sr.string("prompt", 0, 1 << 16);
        sample.text = sr.string("text", 0, 1 << 20);
        if (sr.failed())
            r.fail(sr.error().message);
        s.latestSample = std::move(sample);
    }
    if (r.failed())
        return r.error();
    return s;
}

}  // namespace tandem::net
