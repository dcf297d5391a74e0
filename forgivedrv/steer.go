package forgivedrv

import (
	"golang.org/x/net/bpf"

	"github.com/forgive-emu/forgive/wire"
)

// MaxEngines bounds the config's engines.
const MaxEngines = 16

// Where a datagram's engine is read from (docs/wire.md, the common
// header): the type nibble, the source host and the flow id, at the same
// offsets in every packet but PAUSE, sealed or not. TestSteerProgram
// builds packets with package wire and checks that the program reads them
// as wire does.
const (
	steerOffType = 0
	steerOffSrc  = 4
	steerOffFlow = 8
	// steerMul is Knuth's multiplicative hash constant (2^32 / phi): flow
	// ids that differ in any bit spread over the engines.
	steerMul = 0x9E3779B1
)

// Steer is the engine of a flow to or from peer src with id flow, out of
// n: the function the kernel runs as SteerProgram, computed in Go for
// the flows the host API creates. A flow's every packet names the same
// source host and flow id, so all of them reach its engine.
func Steer(src uint16, flow uint32, n int) int {
	if n <= 1 {
		return 0
	}
	h := flow*steerMul + uint32(src)
	return int((h >> 16) % uint32(n))
}

// SteerProgram is the classic BPF program that gives each datagram the
// daemon's SO_REUSEPORT group receives to its flow's engine: Steer of its
// source host and flow id. A PAUSE frame (no flow: the host link's) goes
// to engine 0, which hands it to the others; a datagram too short to
// hold the fields ends the program at the failed load, which returns 0:
// engine 0 counts it malformed.
func SteerProgram(n int) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: steerOffType, Size: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0x0f},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(wire.TypePause), SkipTrue: 8},
		bpf.LoadAbsolute{Off: steerOffSrc, Size: 2},
		bpf.TAX{},
		bpf.LoadAbsolute{Off: steerOffFlow, Size: 4},
		bpf.ALUOpConstant{Op: bpf.ALUOpMul, Val: steerMul},
		bpf.ALUOpX{Op: bpf.ALUOpAdd},
		bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 16},
		bpf.ALUOpConstant{Op: bpf.ALUOpMod, Val: uint32(max(n, 1))},
		bpf.RetA{},
		bpf.RetConstant{Val: 0},
	}
}
