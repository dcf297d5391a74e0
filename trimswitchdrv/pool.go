package trimswitchdrv

import (
	"sync"

	"github.com/forgive-emu/forgive/udpio"
)

// pool is the free list of packet buffers, all of the same capacity. It
// grows when empty and never shrinks: the number of buffers is the most
// the switch ever held at once, plus one batch per reader.
type pool struct {
	mu   sync.Mutex
	free [][]byte
	size int
	made int // buffers allocated, for the tests and the logs
}

func newPool(size int) *pool { return &pool{size: size, free: make([][]byte, 0, 1024)} }

// getLocked returns a full-length buffer; p.mu is held.
func (p *pool) getLocked() []byte {
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		return b[:p.size]
	}
	p.made++
	return make([]byte, p.size)
}

// newBuffer is the engine's allocator for the frames it makes itself.
func (p *pool) newBuffer(n int) []byte {
	if n > p.size {
		return make([]byte, 0, n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.getLocked()[:0]
}

// refill gives every message without a buffer a fresh one.
func (p *pool) refill(msgs []udpio.Msg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range msgs {
		if msgs[i].Buf == nil {
			msgs[i].Buf = p.getLocked()
		}
	}
}

// put returns buffers to the free list. Buffers of another capacity (a
// frame the engine made larger than the pool's size) are left to the
// garbage collector.
func (p *pool) put(bufs [][]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range bufs {
		if cap(b) == p.size {
			p.free = append(p.free, b[:0])
		}
	}
}

// putMsgs returns the buffers of written messages.
func (p *pool) putMsgs(msgs []udpio.Msg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range msgs {
		if b := msgs[i].Buf; cap(b) == p.size {
			p.free = append(p.free, b[:0])
		}
		msgs[i] = udpio.Msg{}
	}
}

// allocated returns how many buffers the pool ever made.
func (p *pool) allocated() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.made
}
