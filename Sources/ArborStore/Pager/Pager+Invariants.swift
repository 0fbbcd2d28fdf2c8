/// The pager's invariant, checked in builds with Arbor's checks (`ARBOR_INVARIANTS`): every pin
/// a transaction takes on a cached page is released by the time the transaction ends. A pin left
/// behind keeps a frame from eviction for good; an unpin too many lets a frame be evicted while a
/// buffer lent from it is still read.
extension Pager {
    /// What is wrong with the pins now (nil: nothing). Between transactions no frame is pinned.
    func pinViolation() -> String? {
        let unbalanced = cache.unbalancedPins()
        guard !unbalanced.isEmpty else { return nil }
        let listed = unbalanced.prefix(8).map { "page \($0.page) at \($0.pins)" }.joined(separator: ", ")
        return "\(unbalanced.count) cached pages keep pins after the transaction ended: \(listed)"
    }

    /// In builds with Arbor's checks, stops the program when a transaction ends with a page's
    /// pins unbalanced (``pinViolation()``); other builds compile it away. Called as every read
    /// and write transaction ends.
    @inline(__always)
    func checkPinsBalanced() {
        #if ARBOR_INVARIANTS
        if let problem = pinViolation() {
            preconditionFailure("Arbor invariant broken in \(path): \(problem)")
        }
        #endif
    }
}
