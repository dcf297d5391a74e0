package hostapi

import (
	"log/slog"
	"slices"
	"time"
)

// The handlers run on the session's readLoop. Each checks what the server
// owns (the client's own regions and flows, bounds, limits) before asking
// the backend, so a client can never make the backend touch another
// client's resources, whatever the backend does.

func (s *session) hello(req *HelloReq) (*HelloReply, error) {
	if s.helloDone {
		return nil, errorf(CodeBadRequest, "hello already completed")
	}
	if !slices.Contains(req.Versions, Version) {
		return nil, errorf(CodeUnsupportedVersion, "client speaks versions %v, daemon speaks [%d]", req.Versions, Version)
	}
	s.helloDone = true
	s.log.Info("hello", slog.String("name", req.Name), slog.Int("version", Version))
	cfg := s.srv.cfg
	return &HelloReply{Version: Version, HostID: cfg.HostID, HostName: cfg.HostName, Client: s.id, Limits: cfg.Limits}, nil
}

func (s *session) registerMemory(req *RegisterReq, fd int) (*RegisterReply, error) {
	lim := s.srv.cfg.Limits
	if len(s.regions) >= lim.MaxRegions {
		return nil, errorf(CodeLimitExceeded, "%d regions registered, limit %d", len(s.regions), lim.MaxRegions)
	}
	if req.Length > lim.MaxRegisteredBytes-s.registered {
		return nil, errorf(CodeLimitExceeded, "%d bytes registered, %d more exceed the limit of %d",
			s.registered, req.Length, lim.MaxRegisteredBytes)
	}
	mem, err := mapRegion(fd, req.Length)
	if err != nil {
		return nil, err
	}
	id, err := s.srv.backend.RegisterMemory(s.id, mem)
	if err != nil {
		s.unmap(mem)
		return nil, err
	}
	if _, dup := s.regions[id]; dup || id == 0 {
		// The backend broke its contract and may still hold mem: keep the
		// mapping until the client is gone rather than risk a fault.
		s.orphans = append(s.orphans, mem)
		s.log.Error("backend returned an unusable region id", slog.Uint64("region", uint64(id)))
		return nil, errorf(CodeInternal, "backend returned unusable region id %d", id)
	}
	s.regions[id] = mem
	s.registered += req.Length
	s.srv.addMapped(1, req.Length)
	return &RegisterReply{Region: id, Length: req.Length}, nil
}

func (s *session) deregisterMemory(r RegionID) error {
	mem, ok := s.regions[r]
	if !ok {
		return errorf(CodeNoSuchRegion, "region %d is not registered by this client", r)
	}
	if err := s.srv.backend.DeregisterMemory(s.id, r); err != nil {
		return err // still registered, still mapped
	}
	delete(s.regions, r)
	s.registered -= uint64(len(mem))
	s.srv.addMapped(-1, uint64(len(mem)))
	s.unmap(mem)
	return nil
}

func (s *session) createFlow(spec FlowSpec) error {
	if lim := s.srv.cfg.Limits.MaxFlows; len(s.flows) >= lim {
		return errorf(CodeLimitExceeded, "%d flows open, limit %d", len(s.flows), lim)
	}
	if !s.srv.claimFlow(spec.Flow, s.id) {
		// The same reply whoever holds the id: it names no other client
		// and nothing of its flows but what this request already said.
		return errorf(CodeFlowExists, "flow id %d is in use", spec.Flow)
	}
	if err := s.srv.backend.CreateFlow(s.id, spec); err != nil {
		s.srv.releaseFlow(spec.Flow)
		return err
	}
	s.flows[spec.Flow] = struct{}{}
	return nil
}

func (s *session) destroyFlow(f FlowID) error {
	if _, ok := s.flows[f]; !ok {
		return errorf(CodeNoSuchFlow, "flow %d is not open by this client", f)
	}
	if err := s.srv.backend.DestroyFlow(s.id, f); err != nil {
		return err
	}
	delete(s.flows, f)
	s.srv.releaseFlow(f)
	return nil
}

func (s *session) postSend(req SendReq) error {
	if err := s.checkBuffer(req.Flow, req.Region, req.Offset, req.Length); err != nil {
		return err
	}
	return s.withWorkRequest(func() error { return s.srv.backend.PostSend(s.id, req) })
}

func (s *session) postRecv(req RecvReq) error {
	if err := s.checkBuffer(req.Flow, req.Region, req.Offset, req.Length); err != nil {
		return err
	}
	return s.withWorkRequest(func() error { return s.srv.backend.PostRecv(s.id, req) })
}

// checkBuffer checks that the client owns flow and region and that
// [off, off+length) lies inside the region, without overflowing.
func (s *session) checkBuffer(f FlowID, r RegionID, off, length uint64) error {
	if _, ok := s.flows[f]; !ok {
		return errorf(CodeNoSuchFlow, "flow %d is not open by this client", f)
	}
	mem, ok := s.regions[r]
	if !ok {
		return errorf(CodeNoSuchRegion, "region %d is not registered by this client", r)
	}
	if size := uint64(len(mem)); off > size || length > size-off {
		return errorf(CodeOutOfBounds, "offset %d + length %d exceeds region %d of %d bytes", off, length, r, size)
	}
	return nil
}

// withWorkRequest reserves an outstanding slot before posting, so that a
// completion the backend makes before post returns always finds the slot
// it releases, and gives it back if the backend refuses the post.
func (s *session) withWorkRequest(post func() error) error {
	lim := s.srv.cfg.Limits.MaxOutstanding
	s.mu.Lock()
	if s.outstanding >= lim {
		n := s.outstanding
		s.mu.Unlock()
		return errorf(CodeLimitExceeded, "%d work requests outstanding, limit %d", n, lim)
	}
	s.outstanding++
	s.mu.Unlock()
	if err := post(); err != nil {
		s.mu.Lock()
		s.outstanding = max(s.outstanding-1, 0)
		s.mu.Unlock()
		return err
	}
	return nil
}

func (s *session) steps(limit int) (*StepsReply, error) {
	recs, err := s.srv.backend.Steps(s.id)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = DefaultStepRecords
	}
	if len(recs) > limit {
		recs = recs[len(recs)-limit:]
	}
	return &StepsReply{Steps: recs}, nil
}

func (s *session) counters() (*Counters, error) {
	c, err := s.srv.backend.Counters(s.id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	outstanding := s.outstanding
	s.mu.Unlock()
	c.Client = ClientCounters{
		Requests:        s.requests.Load(),
		ErrorReplies:    s.errorReplies.Load(),
		Completions:     s.completions.Load(),
		Regions:         len(s.regions),
		RegisteredBytes: s.registered,
		Flows:           len(s.flows),
		Outstanding:     outstanding,
	}
	return &c, nil
}

func (s *session) status() (*Status, error) {
	st, err := s.srv.backend.Status()
	if err != nil {
		return nil, err
	}
	srv := s.srv.Stats()
	st.HostID = s.srv.cfg.HostID
	st.HostName = s.srv.cfg.HostName
	st.Protocol = Version
	st.Uptime = time.Since(s.srv.started)
	st.Clients = srv.Clients
	st.Regions = srv.Regions
	st.RegisteredBytes = srv.RegisteredBytes
	st.Flows = srv.Flows
	return &st, nil
}
