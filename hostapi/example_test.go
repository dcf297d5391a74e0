package hostapi_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/forgive-emu/forgive/hostapi"
)

// loopback is a toy backend for the example: a send on a flow lands in the
// receive posted on the same flow, by copying between registered regions.
// The real daemon puts its NIC engine here.
type loopback struct {
	srv     *hostapi.Server
	mu      sync.Mutex
	next    hostapi.RegionID
	regions map[hostapi.RegionID][]byte
	recvs   map[hostapi.FlowID][]hostapi.RecvReq
}

func (l *loopback) RegisterMemory(c hostapi.ClientID, mem []byte) (hostapi.RegionID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	l.regions[l.next] = mem
	return l.next, nil
}

func (l *loopback) DeregisterMemory(c hostapi.ClientID, r hostapi.RegionID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.regions, r)
	return nil
}

func (l *loopback) PostRecv(c hostapi.ClientID, req hostapi.RecvReq) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recvs[req.Flow] = append(l.recvs[req.Flow], req)
	return nil
}

func (l *loopback) PostSend(c hostapi.ClientID, s hostapi.SendReq) error {
	l.mu.Lock()
	queued := l.recvs[s.Flow]
	if len(queued) == 0 {
		l.mu.Unlock()
		return fmt.Errorf("no receive posted on flow %d", s.Flow)
	}
	r := queued[0]
	l.recvs[s.Flow] = queued[1:]
	n := copy(l.regions[r.Region][r.Offset:r.Offset+r.Length], l.regions[s.Region][s.Offset:s.Offset+s.Length])
	l.mu.Unlock()
	// Complete never blocks, so a backend may call it from anywhere.
	_ = l.srv.Complete(c, hostapi.Completion{WRID: r.WRID, Kind: hostapi.KindRecv, Flow: r.Flow, Status: hostapi.StatusOK, Len: uint64(n), Step: r.Step})
	_ = l.srv.Complete(c, hostapi.Completion{WRID: s.WRID, Kind: hostapi.KindSend, Flow: s.Flow, Status: hostapi.StatusOK, Len: s.Length})
	return nil
}

func (l *loopback) CreateFlow(hostapi.ClientID, hostapi.FlowSpec) error { return nil }
func (l *loopback) DestroyFlow(hostapi.ClientID, hostapi.FlowID) error  { return nil }
func (l *loopback) BeginStep(hostapi.ClientID, hostapi.StepReq) error   { return nil }
func (l *loopback) EndStep(hostapi.ClientID, uint64) error              { return nil }
func (l *loopback) Counters(hostapi.ClientID) (hostapi.Counters, error) {
	return hostapi.Counters{}, nil
}
func (l *loopback) Steps(hostapi.ClientID) ([]hostapi.StepRecord, error) { return nil, nil }
func (l *loopback) Status() (hostapi.Status, error)                      { return hostapi.Status{}, nil }
func (l *loopback) ClientGone(hostapi.ClientID, hostapi.Owned)           {}

// A rank registers two buffers, opens a gradient flow, announces a step
// and moves its gradients through the daemon. The payload never crosses
// the socket: both sides map the same memory.
func Example() {
	dir, err := os.MkdirTemp("", "hostapi-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "forgived.sock")

	// The daemon side.
	backend := &loopback{regions: map[hostapi.RegionID][]byte{}, recvs: map[hostapi.FlowID][]hostapi.RecvReq{}}
	srv, err := hostapi.Listen(path, hostapi.ServerConfig{HostID: 1, HostName: "host-1"}, backend, slog.New(slog.DiscardHandler))
	if err != nil {
		log.Fatal(err)
	}
	backend.srv = srv
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() { stop(); <-served }()

	// The application side.
	client, err := hostapi.Dial(path)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	fmt.Println("connected to", client.Info().HostName)

	check := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	src, err := client.RegisterMemory(ctx, 4096)
	check(err)
	dst, err := client.RegisterMemory(ctx, 4096)
	check(err)
	gradients := []byte("gradients of step 1")
	copy(src.Bytes(), gradients)

	check(client.CreateFlow(ctx, hostapi.FlowSpec{Flow: 7, Peer: 1, Class: hostapi.ClassGradient, Entropy: hostapi.EntropySpray}))
	check(client.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(true), ExpectedGradientBytes: uint64(len(gradients))}))
	check(client.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: dst.ID(), Length: 4096, Step: 1, WRID: 100}))
	check(client.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: src.ID(), Length: uint64(len(gradients)), WRID: 200}))
	for range 2 {
		c, err := client.Poll(ctx)
		check(err)
		fmt.Printf("%v wr %d: %v, %d bytes, %d forgiven\n", c.Kind, c.WRID, c.Status, c.Len, c.ForgivenBytes())
	}
	fmt.Printf("received %q\n", dst.Bytes()[:len(gradients)])
	check(client.EndStep(ctx, 1))

	// Output:
	// connected to host-1
	// recv wr 100: ok, 19 bytes, 0 forgiven
	// send wr 200: ok, 19 bytes, 0 forgiven
	// received "gradients of step 1"
}
