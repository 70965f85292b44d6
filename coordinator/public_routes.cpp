#include "public_routes.hpp"

#include "http_io.hpp"
#include "public_page.hpp"

#include <nlohmann/json.hpp>

namespace tandem::coord {

namespace {

// The page allows its own inline style and nothing else: no script runs on it, whatever a
// name or a sample holds.
void sendPage(httplib::Response& res, int status, const std::string& html) {
    res.status = status;
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                   "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "public, max-age=30");
    res.set_content(html, "text/html; charset=utf-8");
}

void sendPageRefusal(httplib::Response& res, const Refusal& r) {
    sendPage(res, r.httpStatus,
             "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta "
             "name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Tandem"
             "</title></head><body><p>" +
                 htmlEscape(r.message) + "</p><p><a href=\"/\">The run</a></p></body></html>\n");
}

std::string profileJson(const net::DonorProfile& p) {
    return nlohmann::json{{"display_name", p.displayName.value_or("")},
                          {"team", p.team.value_or("")}}
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void addPublicRoutes(httplib::Server& s, Coordinator& coord, int64_t maxJsonBytes) {
    s.Get("/", [&coord](const httplib::Request&, httplib::Response& res) {
        auto page = coord.publicPage(coord.runId());
        if (!page.ok())
            return sendPageRefusal(res, page.refusal());
        sendPage(res, 200, page.value());
    });
    s.Get(R"(/runs/(\d+))", [&coord](const httplib::Request& req, httplib::Response& res) {
        const auto run = pathNumber(req, 1);
        auto page = coord.publicPage(run.value_or(-1));
        if (!page.ok())
            return sendPageRefusal(res, page.refusal());
        sendPage(res, 200, page.value());
    });

    // Without a token the board alone; with one, also the caller's and its team's standing.
    s.Get(R"(/v1/runs/(\d+)/leaderboard)",
          [&coord](const httplib::Request& req, httplib::Response& res) {
              std::optional<int64_t> client;
              if (req.has_header("Authorization")) {
                  auto id = coord.authenticate(req.get_header_value("Authorization"));
                  if (!id.ok())
                      return sendRefusal(res, id.refusal());
                  client = id.value();
              }
              const auto run = pathNumber(req, 1);
              auto board = coord.leaderboard(run.value_or(-1), client);
              if (!board.ok())
                  return sendRefusal(res, board.refusal());
              sendJson(res, 200, board.value().toJson());
          });

    s.Get("/v1/clients/self", [&coord](const httplib::Request& req, httplib::Response& res) {
        auto id = coord.authenticate(req.get_header_value("Authorization"));
        if (!id.ok())
            return sendRefusal(res, id.refusal());
        auto p = coord.profile(id.value());
        if (!p.ok())
            return sendRefusal(res, p.refusal());
        sendJson(res, 200, profileJson(p.value()));
    });

    s.Put("/v1/clients/self",
          [&coord, maxJsonBytes](const httplib::Request& req, httplib::Response& res) {
              if (static_cast<int64_t>(req.body.size()) > maxJsonBytes)
                  return sendRefusal(res, {413, "too_large",
                                           "the body has " + std::to_string(req.body.size()) +
                                               " bytes; this endpoint accepts at most " +
                                               std::to_string(maxJsonBytes)});
              auto id = coord.authenticate(req.get_header_value("Authorization"));
              if (!id.ok())
                  return sendRefusal(res, id.refusal());
              auto p = coord.updateProfile(id.value(), req.body);
              if (!p.ok())
                  return sendRefusal(res, p.refusal());
              sendJson(res, 200, profileJson(p.value()));
          });
}

}  // namespace tandem::coord
