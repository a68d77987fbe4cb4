// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Foundation

/// The progress line on stderr: rewritten in place on a terminal, one line per step otherwise.
enum Progress {
    private static let isTerminal = isatty(STDERR_FILENO) != 0

    nonisolated(unsafe) private static var lastStep = ""

    /// Shows `text`; off a terminal only when `step` changed, to keep logs short.
    static func show(_ text: String, step: String) {
        if isTerminal {
            write("\r\u{1B}[K\(text)")
        } else if step != lastStep {
            lastStep = step
            write("\(step)\n")
        }
    }

    static func done(_ text: String) {
        write(isTerminal ? "\r\u{1B}[K\(text)\n" : "\(text)\n")
    }

    static func note(_ text: String) { write("\(text)\n") }

    private static func write(_ text: String) {
        FileHandle.standardError.write(text.data(using: .utf8)!)
    }
}
