// Package workload is a data-parallel training job in miniature: ranks that
// run a ring all-reduce of their gradients on every step, with
// tensor-parallel, pipeline-parallel and background traffic beside it,
// through forgived daemons or the simulator's in-process hosts. It plays
// the software above the transport that FORGIVE's four host facts come
// from, and it checks the arithmetic: "the sums are checked for every byte
// that was not forgiven".
//
// One workload for every placement. A rank is a state machine driven by
// its completions (begin the step, compute, post every receive, wait for
// every rank, start the sends, advance on each completion), written once
// against [HostAPI], the host API's calls. A driver runs it:
//
//   - [Run], for real daemons (*hostapi.Client): a goroutine per rank
//     that sleeps through the compute phase and blocks in Poll, on the
//     real clock.
//   - [RunEvents], for an event loop ([Loop], the simulator) and host APIs
//     that deliver completions as they happen ([EventHostAPI]): one
//     goroutine, the loop's virtual clock, a compute phase as a timer,
//     and nothing decided by goroutine timing, so a deterministic loop
//     gives a deterministic run.
//
// What it owns:
//
//   - [Run] and [RunEvents]: set up memory and flows at every rank, run
//     the steps, verify, tear down.
//   - The step: BeginStep at every rank (the classification from a fixed
//     schedule or per-layer gradient norms for the daemon's detector, and
//     ExpectedGradientBytes), a compute phase, every receive posted up
//     front, then the all-reduce driven per rank by its completions, and
//     EndStep at each rank when its last gradient receive is in.
//   - The all-reduce's schedule ([Collective]). The default is the flat
//     ring over every rank (reduce-scatter, then all-gather, N-1 rounds
//     each), which rank.go runs with code of its own, unchanged since
//     before any other schedule existed, so its results stay byte for
//     byte what they were. Any other schedule (an algorithm per logical
//     dimension, data-parallel groups beside tensor-parallel ones,
//     pipelined splits, a fan-in window, a flow per message) is compiled
//     by package collective into each rank's sends and receives with
//     their dependencies, and run by schedRank (schedule.go), which posts
//     a send or applies a receive as soon as its dependencies are met.
//   - DBLP's sender-side shedding baseline: "A hash draw at the sender sheds
//     whole gradient messages" ([ShedConfig]); the receiver computes the
//     same draw and neither posts a receive for a shed message nor waits.
//   - Verification. Every gradient element is a small integer, so every sum
//     over the ranks is exact in float32 whatever the order of the adds.
//     An element touched by a forgiven range or a shed message is tainted
//     (a partial sum carries it on, so taint is global); every other element
//     must equal the exact sum at every rank. Tensor-parallel,
//     pipeline-parallel and background payloads must arrive byte-exact:
//     FORGIVE never forgives them.
//
// Flow ids. Both ends of a flow use the same id, and an id is unique per
// daemon; with base = Config.FlowBase, ranks numbered 0..N-1 and the
// job's stride W = max(1000, N), so that a bank of per-rank ids is as
// wide as the job and no id encodes a fixed rank count:
//
//	base + 1W + i   ring, rank i -> rank i+1 mod N      class gradient
//	base + 2W + k   tensor pair (2k, 2k+1), both ways   class tensor
//	base + 3W + i   pipeline, rank i -> rank (i+N/2)%N  class pipeline
//	base + 4W + i   burst, rank i -> rank 0             class other
//	base + 5W + i   owner notice, rank i -> rank i-1    class other
//
// and, for a compiled schedule in place of the ring's flows, with
// B = max(2^20, W^2) the width of a pair bank and T = 2^20 + B,
//
//	base + 2^20 + Ws + d                     persistent, rank s -> rank d     class gradient
//	base + T + Ws + d                        the tensor group's pair s -> d   class tensor
//	base + T + max(2^21, B) + ((t&1)N + s)M + m   rank s's message m of step t   class gradient
//
// (M is the most messages a rank sends in a step; a flow per message
// alternates between two banks of ids, so a step never reuses an id the
// step before it has just destroyed),
//
// (no tensor pair with Config.TensorParallel TPLocal: the pairs'
// exchanges then run off the fabric, as on NVLink inside a node).
// A job of up to 1000 ranks has the ids it always had (1000 + i, 2^20 +
// 1000s + d, 2^21 + 1000s + d, 2^22 + ...), so its ECMP hashes are
// unchanged; a larger one widens the banks, up to MaxRanks ranks, each
// on its own daemon, and Validate refuses a job whose ids would not fit
// 32 bits above its base. Every flow is destroyed
// and every region closed when Run returns, so a daemon can serve another
// run; step ids continue from Config.StepBase, because "a closed loss
// budget never reopens".
//
// Memory safety of the ring: a send may be retransmitted until it
// completes, so nothing a pending send reads is overwritten. Each receive
// has its own staging slot; an all-gather chunk is forwarded from its
// staging slot and copied into the accumulator only once the rank's
// reduce-scatter send of that chunk has completed. The next step refills
// memory only after every work request of the step has completed.
//
// Import rule: workload is application side. It reaches its hosts only
// through the host API's types (package hostapi) and its own HostAPI and Loop
// interfaces, and imports budget for the shedding hash, the schedule and
// the detector; never nic, sim, reliability or any engine.
package workload
