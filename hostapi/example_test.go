package hostapi_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/forgive-emu/forgive/hostapi"
)

// exampleFatal stops the example on a failed step.
type exampleFatal struct{}

func (exampleFatal) Helper()           {}
func (exampleFatal) Fatal(args ...any) { log.Fatal(args...) }

// A rank registers two buffers, opens a gradient flow, announces a step
// and moves its gradients through the daemon. The payload never crosses
// the socket: both sides map the same memory. The daemon's side here is
// the host API's core over a NIC engine, as in forgived, with a second
// engine for the peer at the flow's other end.
func Example() {
	dir, err := os.MkdirTemp("", "hostapi-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "forgived.sock")

	// The daemon side.
	backend, err := startCore(hostapi.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.close()
	srv, err := hostapi.Listen(path, hostapi.ServerConfig{HostID: coreHost, HostName: "host-3"}, backend, slog.New(slog.DiscardHandler))
	if err != nil {
		log.Fatal(err)
	}
	backend.serve(srv)
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

	check(client.CreateFlow(ctx, hostapi.FlowSpec{Flow: 7, Peer: peerHost, Class: hostapi.ClassGradient, Entropy: hostapi.EntropySpray}))
	check(client.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(true), ExpectedGradientBytes: uint64(len(gradients))}))
	check(client.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: dst.ID(), Length: 4096, Step: 1, WRID: 100}))
	check(client.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: src.ID(), Length: uint64(len(gradients)), WRID: 200}))

	// The peer receives them and sends its own back.
	backend.peerFlow(exampleFatal{}, 7, hostapi.ClassGradient, 4096, 0)
	backend.peerRecv(exampleFatal{}, 7, 4096, 1, 0)
	backend.peerSend(exampleFatal{}, 7, []byte("the peer's gradients"), 2)

	var done []hostapi.Completion
	for range 2 {
		c, err := client.Poll(ctx)
		check(err)
		done = append(done, c)
	}
	slices.SortFunc(done, func(a, b hostapi.Completion) int { return cmp.Compare(a.WRID, b.WRID) })
	for _, c := range done {
		fmt.Printf("%v wr %d: %v, %d bytes, %d forgiven\n", c.Kind, c.WRID, c.Status, c.Len, c.ForgivenBytes())
	}
	fmt.Printf("received %q\n", dst.Bytes()[:done[0].Len])
	check(client.EndStep(ctx, 1))

	// Output:
	// connected to host-3
	// recv wr 100: ok, 20 bytes, 0 forgiven
	// send wr 200: ok, 19 bytes, 0 forgiven
	// received "the peer's gradients"
}
