package nic

// StateSizes counts what the engine holds: the flows (table entries, its
// slots, the round-robin order), the memory of each key's latest tag, the
// regions and the regions' posted-work counts, and the queued control
// packets. A test that creates and destroys flows reads it to see that a
// destroyed flow leaves nothing behind.
func (e *Engine) StateSizes() map[string]int {
	return map[string]int{
		"flows":      e.flows.len(),
		"flow slots": len(e.flows.slots),
		"order":      len(e.order),
		"last tags":  len(e.lastTag),
		"regions":    len(e.regions),
		"in use":     inUse(e),
		"control":    e.ctrl.len(),
	}
}

// inUse counts the regions that posted work names.
func inUse(e *Engine) int {
	n := 0
	for _, c := range e.inUse {
		if c != 0 {
			n++
		}
	}
	return n
}

// ScaledWindow is scaledWindow: ns-3's GetWin with VAR_WIN.
var ScaledWindow = scaledWindow

// SetTxScanMax sets the most flows Transmit scans without its index
// (txindex.go), before the engine has flows.
func (e *Engine) SetTxScanMax(n int) { e.txScanMax = n }
