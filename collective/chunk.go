package collective

// chunk is chunk i of k of span r, cut at element boundaries: a span of e
// elements gives each chunk e/k elements and the first e mod k chunks one
// more, so chunks differ by at most one element and the larger come first.
// When e < k the last k-e chunks are empty.
func chunk(r Span, k, i, elem int) Span {
	e := r.Len / elem
	q, rem := e/k, e%k
	start := i*q + min(i, rem)
	n := q
	if i < rem {
		n++
	}
	return Span{Off: r.Off + start*elem, Len: n * elem}
}

// chunks is the span of chunks i..j-1 of k of r (empty when j <= i).
func chunks(r Span, k, i, j, elem int) Span {
	a := chunk(r, k, i, elem)
	if j <= i {
		return Span{Off: a.Off}
	}
	b := chunk(r, k, j-1, elem)
	return Span{Off: a.Off, Len: b.End() - a.Off}
}

// mod is i modulo n in 0..n-1.
func mod(i, n int) int { return ((i % n) + n) % n }
