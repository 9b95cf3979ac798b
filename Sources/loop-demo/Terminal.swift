#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The terminal the demo draws on: whether a descriptor is one, writing, cursor control, and the keyboard mode that
/// `--interactive` needs.
///
/// This file and `DemoPipe.swift` are the demo's only direct system calls. Every member is safe from any thread:
/// `restore()` in particular may run from a signal-handling queue while the main thread is busy.
enum Terminal {
    private struct SavedState: @unchecked Sendable {  // @unchecked: termios is a plain C struct of integers
        var keyboard: termios?
        var isCursorHidden = false
    }

    private static let saved = Mutex(SavedState())

    /// Standard input's descriptor.
    static let standardInput: CInt = STDIN_FILENO
    /// Standard output's descriptor.
    static let standardOutput: CInt = STDOUT_FILENO
    /// Standard error's descriptor.
    static let standardError: CInt = STDERR_FILENO

    /// Opens /dev/null on each of the standard descriptors that is closed (the program was started with `<&-` or
    /// `>&-`). Otherwise the next socket, pipe or file would take that number, and be read as the keyboard or written
    /// as the output: the echo server's listening socket became standard output, and its first line raised SIGPIPE.
    /// Main thread, before anything else opens a descriptor.
    static func openMissingStandardDescriptors() {
        for descriptor in [Self.standardInput, Self.standardOutput, Self.standardError]
        where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
            let opened = open("/dev/null", O_RDWR)  // the lowest free number: this one, the lower ones being open
            if opened >= 0 && opened != descriptor {
                close(opened)  // not expected; leave the number closed rather than hold a stray descriptor
            }
        }
    }

    /// Whether `descriptor` is a terminal (isatty(3)).
    static func isTerminal(_ descriptor: CInt) -> Bool {
        isatty(descriptor) == 1
    }

    /// Writes `text` to standard output at once (write(2), no stdio buffer: live drawing must not lag).
    static func write(_ text: String) {
        self.writeAll(text, to: STDOUT_FILENO)
    }

    /// Writes `text` to standard error at once.
    static func writeError(_ text: String) {
        self.writeAll(text, to: STDERR_FILENO)
    }

    private static func writeAll(_ text: String, to descriptor: CInt) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes {
                systemWrite(descriptor, $0.baseAddress! + offset, $0.count - offset)
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }  // a closed pipe: nobody is reading, drop the rest
            offset += written
        }
        bytes.removeAll()
    }

    // MARK: Cursor

    /// The escape sequence that moves the cursor up `lines` lines, to the start of the line.
    static func cursorUp(_ lines: Int) -> String {
        lines > 0 ? "\u{1B}[\(lines)F" : "\r"
    }

    /// The escape sequence that clears the rest of the line.
    static let clearToEndOfLine = "\u{1B}[K"

    /// Hides the cursor while a live picture is drawn; `restore()` shows it again.
    static func hideCursor() {
        self.saved.withLock { $0.isCursorHidden = true }
        self.write("\u{1B}[?25l")
    }

    // MARK: Keyboard

    /// Puts the terminal on `descriptor` in non-canonical mode without echo, so that each key arrives at once
    /// (Enter, `q`) instead of after a whole line. Ctrl-C still sends SIGINT. `restore()` undoes it.
    ///
    /// - Returns: Whether the mode changed (false when `descriptor` is not a terminal: then lines arrive as typed).
    @discardableResult
    static func enterKeyboardMode(_ descriptor: CInt) -> Bool {
        guard self.isTerminal(descriptor) else { return false }
        var settings = termios()
        guard tcgetattr(descriptor, &settings) == 0 else { return false }
        self.saved.withLock { $0.keyboard = settings }
        settings.c_lflag &= ~tcflag_t(ICANON | ECHO)
        withUnsafeMutableBytes(of: &settings.c_cc) { characters in
            characters[Int(VMIN)] = 1
            characters[Int(VTIME)] = 0
        }
        return tcsetattr(descriptor, TCSANOW, &settings) == 0
    }

    /// Puts back the keyboard mode of standard input, if `enterKeyboardMode` changed it. Idempotent; any thread.
    static func restoreKeyboard() {
        let keyboard = self.saved.withLock { state in
            defer { state.keyboard = nil }
            return state.keyboard
        }
        if var keyboard {
            _ = tcsetattr(STDIN_FILENO, TCSANOW, &keyboard)
        }
    }

    /// Puts back everything the demo changed: the keyboard mode and the cursor. Idempotent; any thread.
    static func restore() {
        self.restoreKeyboard()
        let cursorWasHidden = self.saved.withLock { state in
            defer { state.isCursorHidden = false }
            return state.isCursorHidden
        }
        if cursorWasHidden {
            self.write("\u{1B}[?25h")
        }
    }

    /// Reads one byte from `descriptor` (read(2)); `nil` at end of file or on an error.
    static func readByte(from descriptor: CInt) -> UInt8? {
        var byte: UInt8 = 0
        while true {
            let count = systemRead(descriptor, &byte, 1)
            if count == 1 { return byte }
            if count < 0 && errno == EINTR { continue }
            return nil
        }
    }
}

// File-scope aliases: inside `Terminal`, `write` names the static method.
private func systemWrite(_ descriptor: CInt, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}

private func systemRead(_ descriptor: CInt, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
