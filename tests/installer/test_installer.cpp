// The .deb as a person installs it: the test makes it from this build tree with cpack, unpacks
// it into a throwaway root (dpkg-deb -x) and checks it there with the tools that judge such files:
// ldd, dpkg-query, desktop-file-validate, appstreamcli, groff/man, systemd-analyze.
//
// Programs this build has (TANDEM_PACKAGED_PROGRAMS) must all be in the package, with a man page
// each; the desktop files come with tandem, the systemd unit with tandem-worker, the nginx server
// blocks (installer/nginx/) with tandem-coordinator. Source files of parts whose program does not
// exist yet (the desktop files before the app, the unit before the worker) are checked from the
// source tree instead, so they cannot rot meanwhile.
#include "tandem_version.hpp"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QXmlStreamReader>
#include <QtTest>

namespace {

struct Result {
    bool started = false;
    int exitCode = -1;
    QByteArray out;
    QByteArray err;
    QString text() const { return QString::fromUtf8(out + err); }
};

Result run(const QString& program, const QStringList& args, const QStringList& env = {},
           const QByteArray& input = {}, int timeoutMs = 120000) {
    QProcess p;
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("LC_ALL", "C.UTF-8");
    for (const QString& kv : env)
        e.insert(kv.section('=', 0, 0), kv.section('=', 1));
    p.setProcessEnvironment(e);
    p.start(program, args);
    Result r;
    r.started = p.waitForStarted(10000);
    if (!r.started)
        return r;
    if (!input.isEmpty())
        p.write(input);
    p.closeWriteChannel();
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
        r.err = "timed out";
        return r;
    }
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

QString tool(const QString& name) {
    return QStandardPaths::findExecutable(name);
}

// Package names of a Depends-style field: "a (>= 1), b | c" gives {a, b, c}.
QSet<QString> packageNames(const QString& field) {
    QSet<QString> names;
    for (const QString& part : field.split(QRegularExpression("[,|]"), Qt::SkipEmptyParts)) {
        const QString name = part.trimmed().section(' ', 0, 0).section(':', 0, 0);
        if (!name.isEmpty())
            names.insert(name);
    }
    return names;
}

// The package that owns a library file, or "" (dpkg-query -S; usrmerge: /lib and /usr/lib).
QString owningPackage(const QString& path) {
    QStringList candidates{path, QFileInfo(path).canonicalFilePath()};
    for (const QString& c : QStringList(candidates)) {
        if (c.startsWith("/lib/"))
            candidates << "/usr" + c;
        else if (c.startsWith("/usr/lib/"))
            candidates << c.mid(4);
    }
    for (const QString& c : candidates) {
        Result r = run("dpkg-query", {"-S", c});
        if (r.exitCode == 0)
            return QString::fromUtf8(r.out).section(':', 0, 0).trimmed();
    }
    return {};
}

// A key of a desktop file's [Desktop Entry] group ("" when absent).
QString desktopValue(const QString& path, const QString& key) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    bool inEntry = false;
    for (const QString& line : QString::fromUtf8(f.readAll()).split('\n')) {
        if (line.startsWith('['))
            inEntry = line == "[Desktop Entry]";
        else if (inEntry && line.startsWith(key + "="))
            return line.mid(key.size() + 1);
    }
    return {};
}

QByteArray gunzip(const QString& path) {
    Result r = run("gzip", {"-dc", path});
    return r.exitCode == 0 ? r.out : QByteArray();
}

}  // namespace

class TestInstaller : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    QString m_deb;
    QString m_root;
    QStringList m_programs;

    QString rootPath(const QString& relative) const { return m_root + "/" + relative; }
    bool packaged(const QString& program) const { return m_programs.contains(program); }

    // The files the package must hold, relative to the root, and nothing else.
    QSet<QString> expectedFiles() const {
        QSet<QString> files;
        for (const QString& p : m_programs) {
            files << "usr/bin/" + p << "usr/share/man/man1/" + p + ".1.gz";
        }
        if (packaged("tandem")) {
            files << "usr/share/applications/tandem.desktop"
                  << "usr/share/metainfo/org.tandem.Tandem.metainfo.xml"
                  << "usr/share/icons/hicolor/scalable/apps/tandem.svg"
                  << "usr/share/tandem/autostart/tandem.desktop";
        }
        if (packaged("tandem-worker"))
            files << "usr/lib/systemd/user/tandem-worker.service";
        if (packaged("tandem-coordinator")) {  // the operator's nginx server blocks
            for (const char* f : {"README.md", "tandem-blobs-origin.conf",
                                  "tandem-blobs-mirror.conf", "tandem-front-ends.conf"})
                files << QStringLiteral("usr/share/tandem/nginx/") + QLatin1String(f);
        }
        return files;
    }

    void validateDesktopFile(const QString& path) {
        QVERIFY2(QFileInfo::exists(path), qPrintable(path + " is missing"));
        Result r = run(tool("desktop-file-validate"), {path});
        QVERIFY2(r.started, "desktop-file-validate did not start");
        // Warnings and hints count as failures too: a clean file prints nothing.
        QVERIFY2(r.exitCode == 0 && r.out.isEmpty() && r.err.isEmpty(),
                 qPrintable(path + ":\n" + r.text()));
        const QString exec = desktopValue(path, "Exec").section(' ', 0, 0);
        QVERIFY2(exec == "tandem", qPrintable(path + ": Exec starts with '" + exec +
                                              "', expected the program tandem"));
        QCOMPARE(desktopValue(path, "Icon"), QString("tandem"));
    }

  private slots:
    void initTestCase() {
        m_programs = QString(TANDEM_PACKAGED_PROGRAMS).split(',', Qt::SkipEmptyParts);
        QVERIFY2(!m_programs.isEmpty(), "this build has no program to package");
        QVERIFY(m_tmp.isValid());
        for (const char* t : {"dpkg-deb", "dpkg-query", "dpkg-shlibdeps", "ldd", "readelf", "gzip",
                              "groff", "man", "desktop-file-validate", "appstreamcli"})
            QVERIFY2(!tool(t).isEmpty(),
                     qPrintable(QString(t) + " is not installed; scripts/setup installs it"));

        // The package from this build tree, gzip-compressed (faster than the release's xz).
        const QString out = m_tmp.path() + "/out";
        Result cpack = run(TANDEM_CPACK_COMMAND,
                           {"--config", TANDEM_BINARY_DIR "/CPackConfig.cmake", "-G", "DEB", "-B",
                            out, "-D", "CPACK_DEBIAN_COMPRESSION_TYPE=gzip"},
                           {}, {}, 600000);
        QVERIFY2(cpack.exitCode == 0, qPrintable("cpack failed:\n" + cpack.text()));
        const QStringList debs = QDir(out).entryList({"*.deb"}, QDir::Files);
        QCOMPARE(debs.size(), 1);
        Result arch = run("dpkg", {"--print-architecture"});
        const QString expectedName =
            QString("tandem_%1_%2.deb").arg(TANDEM_VERSION, QString::fromUtf8(arch.out).trimmed());
        QCOMPARE(debs.first(), expectedName);
        m_deb = out + "/" + debs.first();
        m_root = m_tmp.path() + "/root";
        Result x = run("dpkg-deb", {"-x", m_deb, m_root});
        QVERIFY2(x.exitCode == 0, qPrintable("dpkg-deb -x failed:\n" + x.text()));
    }

    void control() {
        auto field = [&](const char* name) {
            Result r = run("dpkg-deb", {"-f", m_deb, name});
            return QString::fromUtf8(r.out).trimmed();
        };
        QCOMPARE(field("Package"), QString("tandem"));
        QCOMPARE(field("Version"), QString(TANDEM_VERSION));
        QCOMPARE(field("Architecture"),
                 QString::fromUtf8(run("dpkg", {"--print-architecture"}).out).trimmed());
        QCOMPARE(field("Section"), QString("science"));
        QVERIFY(!field("Maintainer").isEmpty());
        const QString description = field("Description");
        QCOMPARE(description.section('\n', 0, 0), QString(TANDEM_PROJECT_DESCRIPTION));
        for (const QString& p : m_programs)
            QVERIFY2(description.contains(p + " is"),
                     qPrintable("the description does not say what " + p + " is"));
        for (const QString& line : description.split('\n'))
            QVERIFY2(line.size() <= 80, qPrintable("description line over 80 columns: " + line));
        QVERIFY(field("Recommends").contains("ca-certificates"));
    }

    void files() {
        QSet<QString> found;
        QDirIterator it(m_root, QDir::Files | QDir::Hidden | QDir::System,
                        QDirIterator::Subdirectories);
        while (it.hasNext())
            found.insert(QDir(m_root).relativeFilePath(it.next()));
        const QSet<QString> expected = expectedFiles();
        for (const QString& f : expected)
            QVERIFY2(found.contains(f), qPrintable("missing from the package: /" + f));
        for (const QString& f : found)
            QVERIFY2(expected.contains(f),
                     qPrintable("unexpected file in the package: /" + f +
                                " (if it belongs there, add it to expectedFiles() here)"));
    }

    // Every library a program needs comes from a package the .deb depends on (directly, or
    // through a package it depends on, as libopenblas0 picks one of its builds).
    void dependencies() {
        const QSet<QString> depends =
            packageNames(QString::fromUtf8(run("dpkg-deb", {"-f", m_deb, "Depends"}).out));
        QVERIFY2(depends.contains("libc6"), "Depends does not even name libc6");
        QSet<QString> reachable = depends;
        for (const QString& d : depends)
            reachable +=
                packageNames(QString::fromUtf8(run("dpkg-query", {"-W", "-f=${Depends}", d}).out));
        QSet<QString> needed;
        for (const QString& p : m_programs) {
            const QString bin = rootPath("usr/bin/" + p);
            const QString dynamic = QString::fromUtf8(run("readelf", {"-d", bin}).out);
            QRegularExpression neededRe(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
            QMap<QString, QString> resolved;  // soname -> path, from ldd
            for (const QString& line : QString::fromUtf8(run("ldd", {bin}).out).split('\n')) {
                const QStringList parts = line.trimmed().split(' ', Qt::SkipEmptyParts);
                if (parts.size() >= 3 && parts[1] == "=>")
                    resolved[parts[0]] = parts[2];
                else if (!parts.isEmpty() && parts[0].startsWith('/'))  // the dynamic loader
                    resolved[QFileInfo(parts[0]).fileName()] = parts[0];
            }
            auto m = neededRe.globalMatch(dynamic);
            while (m.hasNext()) {
                const QString soname = m.next().captured(1);
                needed.insert(soname);
                QVERIFY2(resolved.contains(soname),
                         qPrintable(p + " needs " + soname + ", ldd did not resolve it"));
                const QString owner = owningPackage(resolved[soname]);
                QVERIFY2(!owner.isEmpty(), qPrintable("no package owns " + resolved[soname]));
                QVERIFY2(reachable.contains(owner),
                         qPrintable(p + " needs " + soname + " from " + owner +
                                    ", which the .deb does not depend on"));
            }
        }
        // The ones the issue names, when the programs use them.
        const QList<QPair<QString, QString>> named = {{"libssl.so.3", "libssl3"},
                                                      {"libcurl.so.4", "libcurl4"},
                                                      {"libsqlite3.so.0", "libsqlite3-0"}};
        for (const auto& [soname, package] : named) {
            if (needed.contains(soname))
                QVERIFY2(depends.contains(package),
                         qPrintable(soname + " is needed, Depends lacks " + package));
        }
        if (packaged("tandem")) {
            QVERIFY(depends.contains("qt6-qpa-plugins"));
            QVERIFY(depends.contains("libqt6svg6"));
        }
    }

    void programsRun() {
        const QRegularExpression version(
            "(^|[^0-9.])" + QRegularExpression::escape(TANDEM_VERSION) + "($|[^0-9.])");
        for (const QString& p : m_programs) {
            const QString bin = rootPath("usr/bin/" + p);
            QVERIFY2(QFileInfo(bin).isExecutable(), qPrintable(bin + " is not executable"));
            Result ldd = run("ldd", {bin});
            QVERIFY2(ldd.exitCode == 0 && !ldd.out.contains("not found"),
                     qPrintable("ldd " + p + ":\n" + ldd.text()));
            // No search path into this build or source tree (or anywhere): libraries come from
            // the system.
            Result dyn = run("readelf", {"-d", bin});
            QVERIFY2(!dyn.out.contains("(RPATH)") && !dyn.out.contains("(RUNPATH)"),
                     qPrintable(p + " carries an RPATH/RUNPATH:\n" + dyn.text()));
            // Without a display: --version and --help answer from a terminal over SSH too.
            const QStringList noDisplay{"QT_QPA_PLATFORM=", "DISPLAY=", "WAYLAND_DISPLAY="};
            Result help = run(bin, {"--help"}, noDisplay);
            QVERIFY2(help.exitCode == 0 && help.out.contains("--version"),
                     qPrintable(p + " --help without a display:\n" + help.text()));
            Result v = run(bin, {"--version"}, noDisplay);
            QVERIFY2(v.started, qPrintable(p + " did not start"));
            QVERIFY2(v.exitCode == 0, qPrintable(p + " --version exited " +
                                                 QString::number(v.exitCode) + ":\n" + v.text()));
            const QString firstLine = QString::fromUtf8(v.out).section('\n', 0, 0);
            QVERIFY2(version.match(firstLine).hasMatch(),
                     qPrintable(p + " --version printed '" + firstLine + "', expected version " +
                                TANDEM_VERSION));
        }
    }

    void manPages() {
        QStringList pages;
        for (const QString& p : m_programs)
            pages << rootPath("usr/share/man/man1/" + p + ".1.gz");
        // Pages of programs not built yet: from the build tree, so they are checked meanwhile.
        for (const QString& p : QStringList{"tandem", "tandem-worker", "tandem-coordinator"}) {
            if (!packaged(p))
                pages << TANDEM_BINARY_DIR "/installer/man/" + QString(p) + ".1.gz";
        }
        for (const QString& page : pages) {
            const QString name = QFileInfo(page).fileName().section('.', 0, 0);
            const QByteArray source = gunzip(page);
            QVERIFY2(!source.isEmpty(), qPrintable(page + " is missing or not gzip"));
            QVERIFY2(source.contains("\n.TH " + name.toUpper().toUtf8() + " 1 ") &&
                         source.contains("\"Tandem " TANDEM_VERSION "\""),
                     qPrintable(page + ": .TH does not name " + name.toUpper() +
                                " 1 and Tandem " TANDEM_VERSION));
            // -ww: all warnings; -z: no output, only the diagnostics.
            Result g = run("groff", {"-man", "-Tutf8", "-ww", "-z"}, {}, source);
            QVERIFY2(g.exitCode == 0 && g.err.isEmpty(), qPrintable(page + ":\n" + g.text()));
            Result m = run("man", {"--warnings", "-l", page}, {"MANWIDTH=80"});
            QVERIFY2(m.exitCode == 0 && m.err.isEmpty(),
                     qPrintable("man -l " + page + ":\n" + m.text()));
            const QString text = QString::fromUtf8(m.out);
            for (const char* section : {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SEE ALSO"})
                QVERIFY2(text.contains(QString("\n") + section + "\n"),
                         qPrintable(page + " has no " + section + " section"));
            QVERIFY2(text.contains("--version") && text.contains("--help"),
                     qPrintable(page + " does not document --version and --help"));
            // Every option the program's --help names is in its page.
            if (packaged(name)) {
                Result help =
                    run(rootPath("usr/bin/" + name), {"--help"}, {"QT_QPA_PLATFORM=offscreen"});
                QVERIFY2(help.exitCode == 0, qPrintable(name + " --help:\n" + help.text()));
                auto options = QRegularExpression(R"((?<![\w-])--[a-z][a-z0-9-]*)")
                                   .globalMatch(QString::fromUtf8(help.out));
                int count = 0;
                while (options.hasNext()) {
                    const QString option = options.next().captured(0);
                    ++count;
                    QVERIFY2(text.contains(option), qPrintable(name + " --help names " + option +
                                                               ", its man page does not"));
                }
                QVERIFY2(count >= 2, qPrintable(name + " --help names no options"));
            }
        }
    }

    void desktopEntries() {
        if (packaged("tandem")) {
            validateDesktopFile(rootPath("usr/share/applications/tandem.desktop"));
            validateDesktopFile(rootPath("usr/share/tandem/autostart/tandem.desktop"));
            QVERIFY(desktopValue(rootPath("usr/share/tandem/autostart/tandem.desktop"), "Exec")
                        .contains("--background"));
        } else {
            qInfo("tandem is not built: checking the desktop files of the source tree");
            validateDesktopFile(TANDEM_SOURCE_DIR "/resources/tandem.desktop");
            validateDesktopFile(TANDEM_SOURCE_DIR "/resources/tandem-autostart.desktop");
        }
        // The icon: well-formed SVG, square, from any of the two places.
        const QString icon = packaged("tandem")
                                 ? rootPath("usr/share/icons/hicolor/scalable/apps/tandem.svg")
                                 : QString(TANDEM_SOURCE_DIR "/resources/icons/tandem.svg");
        QFile f(icon);
        QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(icon + " is missing"));
        QXmlStreamReader xml(&f);
        QVERIFY(xml.readNextStartElement());
        QCOMPARE(xml.name(), QStringView(u"svg"));
        const QStringList viewBox = xml.attributes().value("viewBox").toString().split(' ');
        QCOMPARE(viewBox.size(), 4);
        QCOMPARE(viewBox[2], viewBox[3]);
        while (!xml.atEnd())
            xml.readNext();
        QVERIFY2(!xml.hasError(), qPrintable(icon + ": " + xml.errorString()));
    }

    void metainfo() {
        const QString file =
            packaged("tandem")
                ? rootPath("usr/share/metainfo/org.tandem.Tandem.metainfo.xml")
                : QString(TANDEM_BINARY_DIR "/installer/org.tandem.Tandem.metainfo.xml");
        if (!packaged("tandem"))
            qInfo("tandem is not built: checking the metainfo of the build tree");
        Result r = run(tool("appstreamcli"), {"validate", "--no-net", file});
        QVERIFY2(r.exitCode == 0, qPrintable(file + ":\n" + r.text()));
        if (packaged("tandem")) {
            // The installed tree as a whole: the launchable desktop file and the icon are there.
            Result tree = run(tool("appstreamcli"), {"validate-tree", "--no-net", m_root});
            QVERIFY2(tree.exitCode == 0, qPrintable("validate-tree:\n" + tree.text()));
        }
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QXmlStreamReader xml(&f);
        QString id, release, launchable;
        while (!xml.atEnd()) {
            if (xml.readNext() != QXmlStreamReader::StartElement)
                continue;
            if (xml.name() == u"id")
                id = xml.readElementText();
            else if (xml.name() == u"release")
                release = xml.attributes().value("version").toString();
            else if (xml.name() == u"launchable")
                launchable = xml.readElementText();
        }
        QCOMPARE(id, QString("org.tandem.Tandem"));
        QCOMPARE(release, QString(TANDEM_VERSION));
        QCOMPARE(launchable, QString("tandem.desktop"));
    }

    void systemdUnit() {
        const QString analyze = tool("systemd-analyze");
        if (analyze.isEmpty())
            QSKIP("systemd-analyze is not installed: the unit is not verified");
        const QString unit =
            packaged("tandem-worker")
                ? rootPath("usr/lib/systemd/user/tandem-worker.service")
                : QString(TANDEM_SOURCE_DIR "/installer/systemd/tandem-worker.service");
        QFile f(unit);
        QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(unit + " is missing"));
        QString text = QString::fromUtf8(f.readAll());
        QVERIFY(text.contains("\nRestart=on-failure\n"));
        QVERIFY(text.contains("\nWantedBy=default.target\n"));

        // systemd checks that ExecStart's program exists: point it into the unpacked root (the
        // real tandem-worker), or at /bin/true while there is no worker yet.
        QRegularExpression exec("\\nExecStart=(\\S+)");
        auto m = exec.match(text);
        QVERIFY(m.hasMatch());
        QCOMPARE(m.captured(1), QString("tandem-worker"));
        const QString program =
            packaged("tandem-worker") ? rootPath("usr/bin/tandem-worker") : QString("/bin/true");
        QVERIFY(QFileInfo(program).isExecutable());
        text.replace(m.capturedStart(1), m.capturedLength(1), program);

        // Documentation=man:tandem-worker(1) must resolve: the page from the package.
        const QString manDir = m_tmp.path() + "/unit-man";
        QDir().mkpath(manDir + "/man1");
        const QString page = packaged("tandem-worker")
                                 ? rootPath("usr/share/man/man1/tandem-worker.1.gz")
                                 : QString(TANDEM_BINARY_DIR "/installer/man/tandem-worker.1.gz");
        QVERIFY(QFile::copy(page, manDir + "/man1/tandem-worker.1.gz"));

        const QString dir = m_tmp.path() + "/unit";
        QDir().mkpath(dir);
        QFile copy(dir + "/tandem-worker.service");
        QVERIFY(copy.open(QIODevice::WriteOnly));
        copy.write(text.toUtf8());
        copy.close();
        const QString runtime = m_tmp.path() + "/runtime";
        QDir().mkpath(runtime);
        QFile::setPermissions(runtime, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        Result r = run(analyze, {"verify", "--user", copy.fileName()},
                       {"XDG_RUNTIME_DIR=" + runtime, "MANPATH=" + manDir});
        if (r.text().contains("Failed to initialize manager"))
            QSKIP(qPrintable("systemd-analyze cannot run a user manager here: " + r.text()));
        // Unknown keys and bad values are only warnings to systemd: any output fails.
        QVERIFY2(r.exitCode == 0 && r.out.isEmpty() && r.err.isEmpty(),
                 qPrintable("systemd-analyze verify --user " + unit + ":\n" + r.text()));
    }
};

QTEST_APPLESS_MAIN(TestInstaller)
#include "test_installer.moc"
