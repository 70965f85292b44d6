// The layering of docs/architecture.md, checked from the include lines: every `#include "..."` in
// the source folders is resolved to the folder that holds that file, and a folder may only
// include from itself and the folders below it. The build runs sourceTreeKeepsTheLayers too.
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Who may include whom (besides itself): app -> ui -> core -> {net, kernels, storage} -> base;
// coordinator -> {net, kernels, storage} -> base. ui reaches the engine only through core.
const std::map<std::string, std::set<std::string>> kAllowed = {
    {"base", {}},
    {"kernels", {"base"}},
    {"net", {"base"}},
    {"storage", {"base"}},
    {"core", {"net", "kernels", "storage", "base"}},
    {"coordinator", {"net", "kernels", "storage", "base"}},
    {"ui", {"core", "base"}},
    {"app", {"ui", "core", "coordinator", "net", "kernels", "storage", "base"}},
};

// Headers that only some folders may include, whatever the layers allow: the PostgreSQL backend
// (libpq, library tandem_storage_postgres) is the coordinator's alone, never the worker's.
const std::map<std::string, std::set<std::string>> kRestrictedHeaders = {
    {"postgres.hpp", {"storage", "coordinator", "app"}},
};

bool isSource(const fs::path& path) {
    static const std::set<std::string> kExtensions = {".hpp", ".cpp", ".h", ".cu", ".cuh"};
    return kExtensions.count(path.extension().string()) > 0;
}

struct SourceTree {
    std::vector<fs::path> files;  // relative to the root, e.g. kernels/cpu/cpu_ops.hpp
};

SourceTree scan(const fs::path& root) {
    SourceTree tree;
    for (const auto& [folder, allowed] : kAllowed) {
        if (!fs::is_directory(root / folder))
            continue;
        for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
            if (entry.is_regular_file() && isSource(entry.path()))
                tree.files.push_back(fs::relative(entry.path(), root));
        }
    }
    std::sort(tree.files.begin(), tree.files.end());
    return tree;
}

std::string topFolder(const fs::path& relative) {
    return relative.begin()->string();
}

// The folders that hold a file the include could mean: the including file's own directory
// first (as the compiler looks), else every file whose path ends with the include.
std::set<std::string> foldersOf(const SourceTree& tree, const fs::path& from,
                                const std::string& include) {
    const fs::path sibling = (from.parent_path() / include).lexically_normal();
    if (std::binary_search(tree.files.begin(), tree.files.end(), sibling))
        return {topFolder(sibling)};
    std::set<std::string> folders;
    const std::string suffix = "/" + include;
    for (const auto& file : tree.files) {
        const std::string name = file.generic_string();
        if (name.size() > suffix.size() && name.ends_with(suffix))
            folders.insert(topFolder(file));
    }
    return folders;
}

struct Check {
    std::vector<std::string> violations;
    int files = 0;
    int resolvedIncludes = 0;
};

Check checkIncludeRules(const fs::path& root) {
    static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
    Check check;
    const SourceTree tree = scan(root);
    for (const auto& file : tree.files) {
        ++check.files;
        const std::string folder = topFolder(file);
        const std::set<std::string>& allowed = kAllowed.at(folder);
        std::ifstream in(root / file);
        std::string line;
        for (int number = 1; std::getline(in, line); ++number) {
            std::smatch match;
            if (!std::regex_search(line, match, kInclude))
                continue;
            const std::string include = match[1];
            const std::set<std::string> folders = foldersOf(tree, file, include);
            if (folders.empty())
                continue;  // the standard library, a third party, a generated file (moc, version)
            ++check.resolvedIncludes;
            const std::string where = file.generic_string() + ":" + std::to_string(number);
            if (folders.size() > 1) {
                std::string names;
                for (const auto& f : folders)
                    names += (names.empty() ? "" : ", ") + f;
                check.violations.push_back(where + " includes \"" + include +
                                           "\", which is in more than one folder (" + names +
                                           "); give the files distinct names");
                continue;
            }
            const std::string target = *folders.begin();
            const auto restricted = kRestrictedHeaders.find(fs::path(include).filename().string());
            if (restricted != kRestrictedHeaders.end() && restricted->second.count(folder) == 0) {
                check.violations.push_back(where + " includes \"" + include +
                                           "\", which only storage, coordinator and app may "
                                           "include (it links libpq; storage/README.md)");
                continue;
            }
            if (target != folder && allowed.count(target) == 0) {
                check.violations.push_back(where + " includes \"" + include + "\" from folder " +
                                           target + ", which folder " + folder +
                                           " may not depend on (docs/architecture.md, Layers)");
            }
        }
    }
    return check;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& line : lines)
        text += "\n  " + line;
    return text;
}

void writeFile(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

}  // namespace

class TestIncludeRules : public QObject {
    Q_OBJECT
  private slots:
    void sourceTreeKeepsTheLayers() {
        const Check check = checkIncludeRules(TANDEM_SOURCE_DIR);
        // It really read the tree (a wrong root would pass with nothing to check).
        QVERIFY2(check.files > 100, qPrintable(QString::number(check.files)));
        QVERIFY2(check.resolvedIncludes > 200, qPrintable(QString::number(check.resolvedIncludes)));
        QVERIFY2(
            check.violations.empty(),
            qPrintable(QString::fromStdString("forbidden includes:" + joined(check.violations))));
    }

    // The checker itself, on a small tree: allowed includes pass, forbidden ones are named with
    // file, line and the two folders, also for a header in a subfolder.
    void forbiddenIncludesAreReported() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        writeFile(root / "base/expected.hpp", "#pragma once\n");
        writeFile(root / "net/protocol.hpp", "#pragma once\n#include \"expected.hpp\"\n");
        writeFile(root / "kernels/cpu/cpu_ops.hpp", "#pragma once\n");
        writeFile(root / "core/engine.hpp",
                  "#include \"protocol.hpp\"\n#include \"cpu/cpu_ops.hpp\"\n#include <vector>\n");
        writeFile(root / "ui/page.cpp",
                  "#include \"engine.hpp\"\n// #include \"protocol.hpp\"\n"
                  "#include \"expected.hpp\"\n  #  include \"protocol.hpp\"\n");
        writeFile(root / "net/client.cpp", "#include \"protocol.hpp\"\n#include \"cpu_ops.hpp\"\n");
        writeFile(root / "base/random.cpp", "#include \"engine.hpp\"\n#include \"moc_x.cpp\"\n");
        const Check check = checkIncludeRules(root);
        QCOMPARE(check.files, 7);
        const std::vector<std::string> expected = {
            "base/random.cpp:1 includes \"engine.hpp\" from folder core, which folder base may "
            "not depend on (docs/architecture.md, Layers)",
            "net/client.cpp:2 includes \"cpu_ops.hpp\" from folder kernels, which folder net may "
            "not depend on (docs/architecture.md, Layers)",
            "ui/page.cpp:4 includes \"protocol.hpp\" from folder net, which folder ui may not "
            "depend on (docs/architecture.md, Layers)",
        };
        QVERIFY2(check.violations == expected, joined(check.violations).c_str());
    }

    // The PostgreSQL backend's header: the coordinator may include it, the worker's core/ not,
    // although core/ may include the rest of storage/.
    void thePostgresHeaderIsTheCoordinatorsAlone() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        writeFile(root / "storage/database.hpp", "#pragma once\n");
        writeFile(root / "storage/postgres.hpp", "#pragma once\n#include \"database.hpp\"\n");
        writeFile(root / "coordinator/state_store.cpp", "#include \"postgres.hpp\"\n");
        writeFile(root / "core/ledger.cpp",
                  "#include \"database.hpp\"\n#include \"postgres.hpp\"\n");
        const Check check = checkIncludeRules(root);
        const std::vector<std::string> expected = {
            "core/ledger.cpp:2 includes \"postgres.hpp\", which only storage, coordinator and app "
            "may include (it links libpq; storage/README.md)",
        };
        QVERIFY2(check.violations == expected, joined(check.violations).c_str());
    }

    void aNameInTwoFoldersIsReported() {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        writeFile(root / "net/util.hpp", "");
        writeFile(root / "kernels/util.hpp", "");
        writeFile(root / "core/a.cpp", "#include \"util.hpp\"\n");
        // The including file's own directory comes first, as for the compiler.
        writeFile(root / "kernels/b.cpp", "#include \"util.hpp\"\n");
        const Check check = checkIncludeRules(root);
        QCOMPARE(check.violations.size(), size_t{1});
        QVERIFY2(check.violations[0].starts_with("core/a.cpp:1 includes \"util.hpp\", which is in "
                                                 "more than one folder (kernels, net)"),
                 check.violations[0].c_str());
    }
};

QTEST_APPLESS_MAIN(TestIncludeRules)
#include "test_include_rules.moc"
