// The coordinator's names for the shared SQLite wrapper (storage/database.hpp).
#pragma once

#include "database.hpp"

namespace tandem::coord {

using storage::Database;
using storage::Statement;
using storage::Transaction;

}  // namespace tandem::coord
