# The version every program prints and every package carries. It is set once, by project(VERSION)
# in the top-level CMakeLists.txt; this file turns it into something code can read.
#
#   target_link_libraries(<target> PRIVATE tandem_version)
#
# gives the target TANDEM_VERSION as a compile definition ("0.1.0") and the generated header
# tandem_version.hpp (tandem::kVersion, kVersionMajor, kVersionMinor, kVersionPatch).

# The release date of man pages and AppStream metainfo: SOURCE_DATE_EPOCH when set (scripts/package
# sets it to the last commit's time, so a rebuild of the same commit gives the same files), else
# today. string(TIMESTAMP) reads SOURCE_DATE_EPOCH itself.
string(TIMESTAMP TANDEM_RELEASE_DATE "%Y-%m-%d" UTC)

configure_file(${CMAKE_CURRENT_LIST_DIR}/tandem_version.hpp.in
  ${PROJECT_BINARY_DIR}/generated/tandem_version.hpp @ONLY)
add_library(tandem_version INTERFACE)
target_include_directories(tandem_version INTERFACE ${PROJECT_BINARY_DIR}/generated)
target_compile_definitions(tandem_version INTERFACE TANDEM_VERSION="${PROJECT_VERSION}")
