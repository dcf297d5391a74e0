// Package collective compiles collective operations (all-reduce,
// reduce-scatter, all-gather, all-to-all) over a group of ranks into one
// plan per rank: the messages it sends and receives, the byte range of
// each, what the receiver does with it, and what each must wait for. It
// is sans-I/O: it does arithmetic on a Spec and returns a Schedule, and
// it imports no network, file system, clock or other project package
// (internal/archtest holds it to that). Package workload executes the
// plans through the host API's completions; the lab prints their Shape.
//
// # Representation
//
// A plan is sends and receives with dependencies, the way MSCCL writes a
// collective as chunks moved in steps rather than as code: every receive
// has its own staging slot and can be posted before any send; a send is
// posted once the receives it names are applied (or, when it forwards a
// finished value, received) and the sends it names have completed; a
// receive is applied (added or copied into the rank's accumulator) once
// the receives it names are applied and the sends from the accumulator
// that read its bytes have completed, since a send may be retransmitted
// until then. An executor needs nothing else: no rounds, no barriers, and
// each rank advances as its own completions come in. Each algorithm only
// says who sends which range to whom at which step; the dependencies
// are derived from each rank's program by one function (deps.go), and a
// range equal to a finished value received whole is forwarded from that
// receive's slot (From). Empty messages (a vector of fewer elements than
// chunks) are left out.
//
// # Algorithms
//
//   - Ring (ASTRA-sim's Ring; today's workload ring): m-1 rounds of
//     reduce-scatter, then m-1 of all-gather, each rank sending to the
//     next and receiving from the previous one; rank i keeps chunk i+1.
//   - Direct (ASTRA-sim's direct all-reduce over its AllToAll transfers):
//     each rank sends every other rank its chunk of the vector at once
//     and adds the m-1 partial sums of its own chunk, then sends its
//     finished chunk to everyone; Window bounds its sends in flight per
//     phase, which is ASTRA-sim's fan-in window in the sender's terms.
//   - HalvingDoubling (ASTRA-sim's HalvingDoubling; Rabenseifner's
//     algorithm): recursive halving reduce-scatter, exchanging half of
//     the shared block with the rank m/2, m/4, ... away, then recursive
//     doubling all-gather backwards. A group of m = p + r, p the largest
//     power of two <= m, pairs ranks (2j, 2j+1) for j < r: 2j hands 2j+1
//     all of its range but its own chunk, 2j+1 stands for both among the
//     p, and 2j gets its chunk's sum of the others back and adds its own;
//     the all-gather mirrors it. Every rank thus owns one chunk, which a
//     hierarchical composition needs, and 2j sends the range once.
//   - DoubleBinaryTree (NCCL's double binary tree): two complementary
//     binary trees, each reducing half of every piece to its root and
//     broadcasting it back; tree 1 is tree 0 moved by one rank, so a leaf
//     of one tree is an inner node of the other. With Splits pieces the
//     pieces pipeline through the tree's levels as NCCL's chunks do. A
//     tree only all-reduces, so it may be the algorithm of the innermost
//     dimension of an all-reduce only.
//   - AllToAll is compiled by Direct alone, over one dimension, with
//     equal blocks (Bytes a multiple of Ranks x Elem).
//
// # Dimensions and pieces
//
// With Dims [d0, d1, ...] an all-reduce reduce-scatters over dimension 0
// (groups of d0 ranks that differ in coordinate 0 only), all-reduces the
// rank's shard over the remaining dimensions the same way, and
// all-gathers back over dimension 0, as ASTRA-sim's multi-dimensional
// all-reduce and NCCL's hierarchical modes do; each dimension uses its
// own algorithm, and dimensions of one rank are skipped. With Splits k
// the vector is cut into k pieces (ASTRA-sim's preferred dataset
// splits), each of which goes through all of it independently, so
// pieces pipeline across the dimensions. Chunks and pieces are cut at
// element boundaries; when the elements do not divide, the first ones
// get one element more.
//
// # Roles
//
// A received partial sum is Reduce; a finished value is Gather, or
// GatherOwner when the sender performed the last reduction of every
// byte of it (ring: the first all-gather round; direct: the whole
// all-gather; halving-doubling: the first doubling step of a rank that
// finished its whole block; tree: the root's sends), which on a
// hierarchy happens only on the innermost dimension. A standalone
// AllGather treats a rank's own shard the same way. docs/hostapi.md's
// gather policies rely on these labels.
//
// # Not here
//
// No I/O, no clock, no goroutines, and no knowledge of hosts, flows,
// placement or the fabric: ranks are group-local numbers.
package collective
