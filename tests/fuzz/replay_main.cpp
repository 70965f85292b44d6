// The main() of a fuzz target in the ordinary (g++) build: runs the target once on every file
// named or found in the directories named, so that the saved crashes and the seeds are replayed
// by the default test run without clang. Exit 0 when every input ran (a failed check aborts).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

static bool runFile(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", file.c_str());
        return false;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    return true;
}

int main(int argc, char** argv) {
    int ran = 0;
    for (int a = 1; a < argc; ++a) {
        const fs::path arg = argv[a];
        std::error_code ec;
        if (fs::is_directory(arg, ec)) {
            std::vector<fs::path> files;
            for (const auto& e : fs::directory_iterator(arg))
                if (e.is_regular_file() && e.path().filename() != "README.md")
                    files.push_back(e.path());
            std::sort(files.begin(), files.end());
            for (const auto& f : files) {
                if (!runFile(f))
                    return 1;
                ++ran;
            }
        } else if (fs::exists(arg, ec)) {
            if (!runFile(arg))
                return 1;
            ++ran;
        }
        // A directory that does not exist yet (no crash saved for this target) is fine.
    }
    std::printf("replayed %d inputs\n", ran);
    return 0;
}
