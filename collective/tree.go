package collective

import "math/bits"

// doubleTree is NCCL's double binary tree: two binary trees over the
// group, each carrying half of every piece, complementary so that a rank
// that is a leaf of one is an inner node of the other and the two trees
// together use every rank's links about evenly. Each piece's half is
// reduced up its tree (every node adds its children's partial sums and
// sends the result to its parent) and broadcast down from the root, which
// finished the sum and sends it as its owner; inner nodes forward what
// they receive. With Spec.Splits pieces the levels pipeline: a piece
// climbs while the next one starts from the leaves.
//
// The trees here are in-order trees over the positions 1..m: the root of
// a range of positions is the one with the most trailing zero bits, so
// the root of 1..m is the largest power of two <= m, every odd position
// is a leaf and every even one has a child. Tree 0 puts member i at
// position i+1, tree 1 at position i (member 0 at m): a member even in
// one tree is odd in the other, so it is a leaf of at least one of them,
// and inner in exactly one when m is even.
type doubleTree struct {
	m      int
	parent []int32 // by position, 1..m; 0 at the root
	kids   [][2]int32
	height []int8 // leaves 0
	depth  []int8 // root 0
	up     int    // steps of the reduce: the root's height
	down   int    // steps of the broadcast: deepest inner node's depth + 1
}

func newDoubleTree(m int) *doubleTree {
	t := &doubleTree{
		m: m, parent: make([]int32, m+1), kids: make([][2]int32, m+1),
		height: make([]int8, m+1), depth: make([]int8, m+1),
	}
	if m > 1 {
		root := t.build(1, m, 0, 0)
		t.up = int(t.height[root])
	}
	return t
}

// build makes the tree of positions lo..hi below parent and returns its root.
func (t *doubleTree) build(lo, hi, parent int, depth int8) int {
	if lo > hi {
		return 0
	}
	root := lo
	if lo != hi {
		k := bits.Len(uint(lo ^ hi))
		root = hi >> (k - 1) << (k - 1)
	}
	t.parent[root], t.depth[root] = int32(parent), depth
	l := t.build(lo, root-1, root, depth+1)
	r := t.build(root+1, hi, root, depth+1)
	t.kids[root] = [2]int32{int32(l), int32(r)}
	for _, c := range []int{l, r} {
		if c != 0 {
			t.height[root] = max(t.height[root], t.height[c]+1)
			t.down = max(t.down, int(depth)+1)
		}
	}
	return root
}

// position is member i's position in tree k.
func (t *doubleTree) position(k, i int) int {
	if k == 0 {
		return i + 1
	}
	if i == 0 {
		return t.m
	}
	return i
}

// member is the member at position x of tree k.
func (t *doubleTree) member(k, x int) int {
	if k == 0 {
		return x - 1
	}
	if x == t.m {
		return 0
	}
	return x
}

func (t *doubleTree) steps(o op, m int) int {
	if o == opReduce {
		return t.up
	}
	return t.down
}

func (*doubleTree) owned(m, pos int) int { return pos }

// emit sends, at step s of the reduce, every node of height s up to its
// parent, and at step s of the broadcast, every node of depth s down to
// its children.
func (t *doubleTree) emit(g *group, step int) {
	for k := range 2 {
		half := chunk(g.r, 2, k, g.c.spec.Elem)
		for x := 1; x <= t.m; x++ {
			if g.st.op == opReduce {
				if int(t.height[x]) == step && t.parent[x] != 0 {
					g.send(t.member(k, x), t.member(k, int(t.parent[x])), half, Reduce, false)
				}
				continue
			}
			if int(t.depth[x]) == step {
				for _, c := range t.kids[x] {
					if c != 0 {
						g.send(t.member(k, x), t.member(k, int(c)), half, Gather, t.parent[x] == 0)
					}
				}
			}
		}
	}
}
