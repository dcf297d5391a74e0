package nic

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/splitmix"
	"github.com/forgive-emu/forgive/wire"
)

// MaxGroup bounds the engines of one host (NewGroup).
const MaxGroup = 64

// NewGroup returns the n engines of one host, for a driver that runs each
// on its own goroutine with its own socket and gives each flow to one of
// them (forgived's engines). What one host is, they share, so that a flow
// sees the same host whichever engine runs it:
//
//   - the host link: one pacer at the line rate for all of them (Link),
//     so together they send no faster than one engine would;
//   - the loss budget: one step ledger and one detector, so a step's
//     budget counts every gradient byte the host receives for it, over
//     every engine, as one engine's ledger does, and no range is charged
//     twice (each range belongs to one flow, each flow to one engine).
//
// Each engine keeps its own flows, regions, counters and randomness (its
// flow tags are drawn from a key of its own). The shared parts are locked;
// everything else is, as for one engine, not safe for concurrent use.
// BeginStep, EndStep, Steps, StepRecord and CheckStep read the shared
// ledger, so any engine of the group answers them alike. A PAUSE frame
// stops the host link: the driver hands it to every engine (ReceivePause).
//
// n == 1 is New: an engine that shares nothing and takes no lock.
func NewGroup(cfg Config, n int) ([]*Engine, error) {
	if n < 1 || n > MaxGroup {
		return nil, fmt.Errorf("%w: %d engines: want 1..%d", ErrConfig, n, MaxGroup)
	}
	if n == 1 {
		e, err := New(cfg)
		if err != nil {
			return nil, err
		}
		return []*Engine{e}, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The shared ledger draws from a generator of its own: the engines'
	// generators are each used by one goroutine without the lock.
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Host)<<32|0x6c6564676572))
	jobs, err := newJobBudgets(cfg, rng)
	if err != nil {
		return nil, err
	}
	sh := &shared{link: &Link{p: congestion.NewPacer(congestion.PacerConfig{Burst: cfg.SenderCC.Pacer.Burst}), rate: float64(cfg.LineRate)}}
	base := tagSeed(cfg)
	out := make([]*Engine, n)
	for i := range out {
		c := cfg
		c.TagSeed = base
		c.TagSeed[0] ^= byte(i) // each engine's tags from its own key
		c.TagSeed[1] ^= byte(i >> 8)
		c.Seed = cfg.Seed + uint64(i)
		if c.TagSeed == ([32]byte{}) {
			c.TagSeed[31] = 1 // zero would mean "derive from Seed"
		}
		e, err := New(c)
		if err != nil {
			return nil, err
		}
		e.jobs, e.shared = jobs, sh
		out[i] = e
	}
	return out, nil
}

// tagSeed is the key of an engine's flow tags: the config's, or when it
// is zero one derived from Seed and Host, as the simulator's are.
func tagSeed(cfg Config) [32]byte {
	seed := cfg.TagSeed
	if seed == ([32]byte{}) {
		for i := range 4 {
			x := splitmix.Next(cfg.Seed ^ uint64(cfg.Host)<<48 ^ uint64(i)*0x7461677365656421)
			for j := range 8 {
				seed[i*8+j] = byte(x >> (8 * j))
			}
		}
	}
	return seed
}

// shared is what the engines of a group share (NewGroup): the budget's
// lock, taken around every use of the ledger and the detector, and the
// host link.
type shared struct {
	mu   sync.Mutex
	link *Link
}

// Link is a group's host link: one pacer at the line rate, shared by its
// engines under a lock. Two engines that find it ready at the same moment
// may each send a packet: the link then runs at most one packet per
// engine ahead of its schedule, which the next departures pay back.
type Link struct {
	mu   sync.Mutex
	p    congestion.Pacer
	rate float64
}

func (l *Link) ready(now time.Duration) bool {
	l.mu.Lock()
	ok := l.p.Ready(now)
	l.mu.Unlock()
	return ok
}

func (l *Link) onSend(now time.Duration, n int) {
	l.mu.Lock()
	l.p.OnSend(now, n, l.rate)
	l.mu.Unlock()
}

func (l *Link) nextSend() time.Duration {
	l.mu.Lock()
	t := l.p.NextSend()
	l.mu.Unlock()
	return t
}

// lockBudget takes the group's budget lock; an engine alone takes none.
func (e *Engine) lockBudget() {
	if e.shared != nil {
		e.shared.mu.Lock()
	}
}

func (e *Engine) unlockBudget() {
	if e.shared != nil {
		e.shared.mu.Unlock()
	}
}

func (e *Engine) portReady(now time.Duration) bool {
	if e.shared != nil {
		return e.shared.link.ready(now)
	}
	return e.port.Ready(now)
}

func (e *Engine) portSent(now time.Duration, n int) {
	if e.shared != nil {
		e.shared.link.onSend(now, n)
		return
	}
	e.port.OnSend(now, n, e.lineRate)
}

func (e *Engine) portNext() time.Duration {
	if e.shared != nil {
		return e.shared.link.nextSend()
	}
	return e.port.NextSend()
}

// ReceivePause applies a PAUSE frame another engine of the group received
// (wire.Validate passed it): the host link's pause holds for every
// engine. It is not counted as a received packet here; Pauses counts it,
// so each engine of a group counts the host's PAUSE frames.
func (e *Engine) ReceivePause(now time.Duration, p wire.Pause) {
	e.onPause(e.observe(now), p)
}
