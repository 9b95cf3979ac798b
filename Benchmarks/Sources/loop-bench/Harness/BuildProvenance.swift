import Foundation

/// What a recording was built from: the commit of the package's working tree, and the sources changed since their
/// module was last compiled. A sitting measures the binary, not the tree, so a binary older than its sources (a change
/// reverted, or made, without a `swift build -c release` after it) measures code that is no longer there; this makes
/// that visible at the top of the output and in the JSON.
struct BuildProvenance {
    /// `git rev-parse --short HEAD` in the package, with "+changes" when the tree differs from it; `nil` when the
    /// executable is not inside a git checkout of the package (or git is not there).
    let treeCommit: String?
    /// The package's source files (under `Sources` and `Benchmarks/Sources`) modified after their module was last
    /// compiled into this build, relative to the package; empty when the build is current, or when the package's
    /// sources are not found above the executable.
    let sourcesNewerThanBuild: [String]

    /// The provenance of the running executable, found by walking up from its path to the package's `Package.swift`
    /// (`.build/<triple>/release/loop-bench` sits inside the package).
    static func ofRunningExecutable() -> BuildProvenance {
        let executable = URL(fileURLWithPath: System.executablePath).resolvingSymlinksInPath()
        guard let root = Self.packageRoot(above: executable),
              let linked = Self.modificationDate(of: executable) else {
            return BuildProvenance(treeCommit: nil, sourcesNewerThanBuild: [])
        }
        let products = executable.deletingLastPathComponent()
        var stale: [String] = []
        for sources in ["Sources", "Benchmarks/Sources"] {
            let targets = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(sources).path))
                ?? []
            for target in targets {
                let compiled = Self.lastCompiled(target, in: products, notBefore: linked)
                stale += Self.sourceFiles(under: root.appendingPathComponent(sources + "/" + target), root: root)
                    .filter { (Self.modificationDate(of: root.appendingPathComponent($0)) ?? .distantPast) > compiled }
            }
        }
        return BuildProvenance(treeCommit: Self.treeCommit(in: root), sourcesNewerThanBuild: stale.sorted())
    }

    /// When `target` was last compiled into the build in `products`: the newest file its compiler wrote there (a
    /// release build compiles a Swift module whole, rewriting its dependency file even when every object comes out
    /// the same and the executable is not linked again), or the executable's link, whichever is later.
    private static func lastCompiled(_ target: String, in products: URL, notBefore linked: Date) -> Date {
        let directory = products.appendingPathComponent(target.replacingOccurrences(of: "-", with: "_") + ".build")
        let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        return files.compactMap(Self.modificationDate(of:)).reduce(linked, max)
    }

    /// One line for the output's header.
    var summary: String {
        let commit = "tree \(self.treeCommit ?? "unknown")"
        guard let first = self.sourcesNewerThanBuild.first else {
            return "Build: \(commit); no source is newer than this binary."
        }
        let count = self.sourcesNewerThanBuild.count
        return "Build: \(commit). WARNING: \(count) source file\(count == 1 ? " was" : "s were") modified after this "
            + "binary was built (\(first)\(count > 1 ? ", …" : "")): it may not measure the tree's code. Run "
            + "`swift build -c release` first."
    }

    private static func packageRoot(above executable: URL) -> URL? {
        var directory = executable.deletingLastPathComponent()
        while directory.path != "/" {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) {
                return directory
            }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    private static func modificationDate(of url: URL) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date
    }

    /// The Swift, C and header files at `url` (a file, or a directory searched recursively), relative to `root`.
    private static func sourceFiles(under url: URL, root: URL) -> [String] {
        let rootPath = root.standardizedFileURL.path + "/"
        let relative = { (file: URL) in String(file.standardizedFileURL.path.dropFirst(rootPath.count)) }
        let isSource = { (file: URL) in ["swift", "c", "h"].contains(file.pathExtension) }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return isSource(url) ? [relative(url)] : [] }
        let files = FileManager.default.enumerator(at: url, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL } ?? []
        return files.filter(isSource).map(relative)
    }

    private static func treeCommit(in root: URL) -> String? {
        guard let commit = Self.git(["rev-parse", "--short", "HEAD"], in: root), !commit.isEmpty else { return nil }
        let changes = Self.git(["status", "--porcelain", "--untracked-files=no"], in: root) ?? ""
        return changes.isEmpty ? commit : commit + "+changes"
    }

    /// What `git arguments` prints in `directory`, trimmed; `nil` when it cannot run or fails.
    private static func git(_ arguments: [String], in directory: URL) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "-C", directory.path] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return nil
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
