// The routes of the coordinator's public face (public_face.cpp): the run page at / and
// /runs/{run}, GET /v1/runs/{run}/leaderboard, and GET/PUT /v1/clients/self (a donor's display
// name and team). Registered by Server (server.cpp) next to the protocol's other routes.
#pragma once

#include "coordinator.hpp"

#include <httplib.h>

#include <cstdint>

namespace tandem::coord {

// maxJsonBytes: the bound of a PUT /v1/clients/self body (the server's JSON limit).
void addPublicRoutes(httplib::Server& server, Coordinator& coordinator, int64_t maxJsonBytes);

}  // namespace tandem::coord
