import Logging

extension Logger {
    /// A logger for the engine under tests that make it fail on purpose (power cuts, injected
    /// I/O errors, recoveries by the thousand): only `critical` messages, which Arbor never
    /// logs, get through. Tests of what is logged use an in-memory handler instead.
    public static var quietStore: Logger {
        var logger = Logger(label: "arbor.store")
        logger.logLevel = .critical
        return logger
    }
}
