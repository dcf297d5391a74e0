package hostapi

import "context"

// ReleasedForTest returns a channel closed when client c's teardown has
// finished (backend told, regions unmapped), or nil if c is not connected.
func (srv *Server) ReleasedForTest(c ClientID) <-chan struct{} {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if s := srv.sessions[c]; s != nil {
		return s.released
	}
	return nil
}

// DeregisterForTest deregisters a region id the client may not own, which
// the Region type cannot express.
func DeregisterForTest(c *Client, r RegionID) error {
	return c.call(context.Background(), OpDeregisterMemory, &DeregisterReq{Region: r}, nil, -1)
}

// SetDaemonUIDForTest makes the server take uid for the daemon's own, so
// that a test's client (of another uid) is checked against the lists.
func (srv *Server) SetDaemonUIDForTest(uid uint32) { srv.selfUID = uid }
