package hostapi

import (
	"log/slog"
	"slices"
	"time"
)

// The handlers run on the session's readLoop. What a request may do
// (ownership of regions and flows, buffer bounds, the per-client limits)
// is the backend's to decide (hostapi/nicapi decides it for forgived and
// the simulator alike); the server keeps only what the socket needs: the
// hello, the descriptors and the mappings.

func (s *session) hello(req *HelloReq) (*HelloReply, error) {
	if s.helloDone {
		return nil, errorf(CodeBadRequest, "hello already completed")
	}
	if !slices.Contains(req.Versions, Version) {
		return nil, errorf(CodeUnsupportedVersion, "client speaks versions %v, daemon speaks [%d]", req.Versions, Version)
	}
	job := Job{UID: s.uid, Name: req.Job}
	if err := s.srv.joinJob(s, job); err != nil {
		return nil, err
	}
	if err := s.srv.backend.Hello(s.id, job); err != nil {
		s.srv.leaveJob(s, job)
		return nil, err
	}
	s.job, s.helloDone = job, true
	s.log.Info("hello", slog.String("name", req.Name), slog.String("job", req.Job), slog.Int("version", Version))
	cfg := s.srv.cfg
	return &HelloReply{Version: Version, HostID: cfg.HostID, HostName: cfg.HostName, Client: s.id, Limits: cfg.Limits, Job: req.Job}, nil
}

// registerMemory asks the backend whether the client may register the
// region before mapping it, so that a refusal costs no mapping.
func (s *session) registerMemory(req *RegisterReq, fd int) (*RegisterReply, error) {
	if err := s.srv.backend.CheckRegister(s.id, req.Length); err != nil {
		return nil, err
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
	s.srv.addMapped(1, req.Length)
	return &RegisterReply{Region: id, Length: req.Length}, nil
}

// deregisterMemory unmaps the region once the backend has let go of it.
func (s *session) deregisterMemory(r RegionID) error {
	if err := s.srv.backend.DeregisterMemory(s.id, r); err != nil {
		return err // still registered, still mapped
	}
	mem, ok := s.regions[r]
	if !ok {
		// The backend released a region the server never mapped for this
		// client: nothing to unmap, but it broke its contract.
		s.log.Error("backend deregistered a region the client never registered", slog.Uint64("region", uint64(r)))
		return nil
	}
	delete(s.regions, r)
	s.srv.addMapped(-1, uint64(len(mem)))
	s.unmap(mem)
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

// counters are the backend's, with the session's own counts of requests,
// error replies and completions written.
func (s *session) counters() (*Counters, error) {
	c, err := s.srv.backend.Counters(s.id)
	if err != nil {
		return nil, err
	}
	c.Client.Requests = s.requests.Load()
	c.Client.ErrorReplies = s.errorReplies.Load()
	c.Client.Completions = s.completions.Load()
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
	return &st, nil
}
