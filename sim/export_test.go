package sim

// InspectEveryHop makes every switch of s parse every header from its
// bytes, as before the parse travelled with the packet, for tests that
// compare the two.
func InspectEveryHop(s *Sim) { s.inspectEveryHop = true }
