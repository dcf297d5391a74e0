package tss

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"

	"github.com/forgive-emu/forgive/wire"
)

// KeyLen is the length of a domain's master key.
const KeyLen = 32

// Key is a security domain's master key.
type Key [KeyLen]byte

// Domain is one security domain: its id, carried in every sealed packet,
// its master key, and the hosts that belong to it. Empty Hosts makes it the
// default domain: the one for every host no other domain lists.
type Domain struct {
	ID    uint32
	Key   Key
	Hosts []uint16
}

// Sentinel errors; Open and Seal wrap them with context. Reason names
// each for counters.
var (
	ErrUnsealed      = errors.New("tss: packet is not sealed")
	ErrUnknownDomain = errors.New("tss: sealed for an unknown security domain")
	ErrWrongDomain   = errors.New("tss: sealed for another domain than its source host's")
	ErrHeaderTag     = errors.New("tss: header tag does not authenticate")
	ErrPayloadTag    = errors.New("tss: payload does not authenticate")
	ErrMalformed     = errors.New("tss: malformed sealed packet")
	ErrNoDomain      = errors.New("tss: no security domain for the destination host")
	ErrNotSealable   = errors.New("tss: packet cannot be sealed")
	ErrNonceSpace    = errors.New("tss: nonce counter exhausted")
	ErrConfig        = errors.New("tss: bad domain configuration")
	ErrReplayed      = errors.New("tss: replayed: a nonce already opened, too old, or of an earlier start of its sender")
)

// Reason returns the counter name of a refusal returned by Open or Seal:
// "unsealed", "unknown_domain", "wrong_domain", "header_tag",
// "payload_tag", "malformed", "no_domain", "not_sealable",
// "nonce_space", "replayed"; "" for nil or another error.
func Reason(err error) string {
	if r, ok := err.(*refusal); ok { // Open's own: no unwrapping
		err = r.err
	}
	for _, r := range reasons {
		if err == r.err {
			return r.name
		}
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return ""
}

var reasons = [...]struct {
	err  error
	name string
}{
	{ErrUnsealed, "unsealed"}, {ErrUnknownDomain, "unknown_domain"}, {ErrWrongDomain, "wrong_domain"},
	{ErrHeaderTag, "header_tag"}, {ErrPayloadTag, "payload_tag"}, {ErrMalformed, "malformed"},
	{ErrNoDomain, "no_domain"}, {ErrNotSealable, "not_sealable"}, {ErrNonceSpace, "nonce_space"},
	{ErrReplayed, "replayed"},
}

// refusal is a refusal by OpenInPlace (or Seal): its sentinel error and
// the packet's type and up to two numbers its message names, formatted
// only when the message is read, so a refusal costs no formatting: a
// flood of forgeries costs the checks that refuse them. An Opener keeps
// one per reason and returns it (Opener.refused), so it refuses without
// allocating.
type refusal struct {
	err    error
	t      wire.Type
	format string // the message after the sentinel's; %[1]v is t, %[2]d x, %[3]d y
	x, y   uint64
}

func refused(err error, t wire.Type, format string, x, y uint64) error {
	return &refusal{err: err, t: t, format: format, x: x, y: y}
}

func (r *refusal) Error() string {
	return r.err.Error() + ": " + fmt.Sprintf(r.format, r.t, r.x, r.y)
}

func (r *refusal) Unwrap() error { return r.err }

// refused returns the Opener's refusal for err's reason, set to t, format,
// x and y: its sentinel never changes, its message is that of the latest
// refusal for the same reason.
func (o *Opener) refused(err error, t wire.Type, format string, x, y uint64) error {
	for i := range reasons {
		if reasons[i].err == err {
			r := &o.refs[i]
			*r = refusal{err: err, t: t, format: format, x: x, y: y}
			return r
		}
	}
	return refused(err, t, format, x, y)
}

// HKDF parameters: the salt names the protocol and its version, the info
// names the subkey's use, the domain and the sender's start (its nonce
// prefix), so no two uses, domains or sender starts share a key even if
// two domains were given the same master key.
const (
	hkdfSalt       = "FORGIVE TSS v2"
	infoHeaderTag  = "header tag"
	infoPayloadKey = "payload"
)

type domainKeys struct {
	id  uint32
	idx int    // the domain's index in a Sealer's keys
	prk []byte // HKDF pseudorandom key of the master key
}

// startKeys are the AEADs of one sender start in one domain: AES-256-GCM
// under subkeys derived from the domain's key and the start's nonce prefix.
// The header AEAD authenticates only (empty plaintext, header as
// associated data).
type startKeys struct {
	header cipher.AEAD
	body   cipher.AEAD
}

// Keyring holds the keys of a host's domains and which domain each host
// belongs to. It is read-only once made and safe for concurrent use.
type Keyring struct {
	domains map[uint32]*domainKeys
	byHost  map[uint16]*domainKeys
	dflt    *domainKeys
	n       int
}

// NewKeyring derives the subkeys of every domain. Domain ids must be
// distinct, a host may belong to one domain only, and at most one domain
// may be the default (no Hosts).
func NewKeyring(domains ...Domain) (*Keyring, error) {
	if len(domains) == 0 {
		return nil, fmt.Errorf("%w: no domain", ErrConfig)
	}
	k := &Keyring{domains: map[uint32]*domainKeys{}, byHost: map[uint16]*domainKeys{}}
	for i, d := range domains {
		if _, dup := k.domains[d.ID]; dup {
			return nil, fmt.Errorf("%w: domain %d: id %d given twice", ErrConfig, i, d.ID)
		}
		if d.Key == (Key{}) {
			return nil, fmt.Errorf("%w: domain %d: the key is all zero", ErrConfig, d.ID)
		}
		prk, err := hkdf.Extract(sha256.New, d.Key[:], []byte(hkdfSalt))
		if err != nil {
			return nil, fmt.Errorf("tss: domain %d: %w", d.ID, err)
		}
		dk := &domainKeys{id: d.ID, idx: k.n, prk: prk}
		k.n++
		k.domains[d.ID] = dk
		if len(d.Hosts) == 0 {
			if k.dflt != nil {
				return nil, fmt.Errorf("%w: domains %d and %d both list no hosts (only one may be the default)",
					ErrConfig, k.dflt.id, d.ID)
			}
			k.dflt = dk
		}
		for _, h := range d.Hosts {
			if o, dup := k.byHost[h]; dup {
				return nil, fmt.Errorf("%w: host %d is in domains %d and %d", ErrConfig, h, o.id, d.ID)
			}
			k.byHost[h] = dk
		}
	}
	return k, nil
}

// derive returns the AEADs of the sender start whose nonce prefix is
// prefix, in domain dk.
func (dk *domainKeys) derive(prefix []byte) (startKeys, error) {
	h, err := dk.subkey(nil, infoHeaderTag, prefix)
	if err != nil {
		return startKeys{}, err
	}
	b, err := dk.subkey(nil, infoPayloadKey, prefix)
	if err != nil {
		return startKeys{}, err
	}
	return startKeys{header: h, body: b}, nil
}

// subkey returns the AEAD of one use (infoHeaderTag, infoPayloadKey) of
// the sender start whose nonce prefix is prefix, in domain dk: AES-256-GCM
// under the key expand returns.
func (dk *domainKeys) subkey(mac hash.Hash, use string, prefix []byte) (cipher.AEAD, error) {
	key, err := dk.expand(mac, use, prefix)
	if err != nil {
		return nil, err
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(blk)
}

// expand returns the 32-byte subkey of one use of the sender start whose
// nonce prefix is prefix, in domain dk: HKDF-Expand(prk, use || domain id
// || prefix, 32). With mac, an HMAC-SHA256 keyed with dk.prk (an Opener
// keeps one per domain), it is that HMAC of the info and the counter byte
// 1, which is what HKDF-Expand computes for one hash-length block (RFC
// 5869, section 2.3), without keying a new HMAC each time.
func (dk *domainKeys) expand(mac hash.Hash, use string, prefix []byte) ([]byte, error) {
	var buf [32 + 4 + prefixLen + 1]byte
	info := append(buf[:0], use...)
	info = binary.BigEndian.AppendUint32(info, dk.id)
	info = append(info, prefix...)
	if mac == nil {
		key, err := hkdf.Expand(sha256.New, dk.prk, string(info), 32)
		if err != nil {
			return nil, fmt.Errorf("tss: derive %s key of domain %d: %w", use, dk.id, err)
		}
		return key, nil
	}
	mac.Reset()
	mac.Write(append(info, 1))
	return mac.Sum(make([]byte, 0, sha256.Size)), nil
}

// Domains returns the domain ids, sorted.
func (k *Keyring) Domains() []uint32 {
	ids := make([]uint32, 0, len(k.domains))
	for id := range k.domains {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// DomainOf returns the domain of host h: the domain that lists it, or the
// default domain.
func (k *Keyring) DomainOf(h uint16) (uint32, bool) {
	d := k.of(h)
	if d == nil {
		return 0, false
	}
	return d.id, true
}

func (k *Keyring) of(h uint16) *domainKeys {
	if d, ok := k.byHost[h]; ok {
		return d
	}
	return k.dflt
}

// Offsets within the sublayer's extension, which starts right after the
// header (wire.HeaderLen), and within its nonce: the sender's start
// (epoch, then random bits: the nonce prefix), then the counter of the
// packets it sealed for the destination host.
const (
	extDomain = 0
	extNonce  = extDomain + wire.SealDomainLen
	extTag    = extNonce + wire.SealNonceLen
	// adExt is how much of the extension the tags authenticate: the
	// domain and the nonce.
	adExt = extTag

	epochLen  = 8
	prefixLen = wire.SealNonceLen - 8 // epoch and random bits
	ctrOff    = prefixLen

	// gcmNonce is the AES-GCM nonce: the destination host, two zero
	// bytes, and the counter. Under one sender start's key, a destination
	// and a counter name one packet.
	gcmNonceLen = 12
)

// header checks the header of b and returns its type and length.
func header(b []byte) (wire.Type, int, error) {
	t, err := wire.Peek(b)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	hl, ok := wire.HeaderLen(t)
	if !ok {
		return 0, 0, refused(ErrMalformed, t, "%[1]v has no header length", 0, 0)
	}
	if len(b) < hl {
		return 0, 0, refused(ErrMalformed, t, "%[1]v of %[2]d bytes, header is %[3]d", uint64(len(b)), uint64(hl))
	}
	return t, hl, nil
}

// putGCMNonce writes the AES-GCM nonce of the packet to dst with counter
// ctr into n.
func putGCMNonce(n *[gcmNonceLen]byte, dst uint16, ctr uint64) {
	binary.BigEndian.PutUint16(n[0:], dst)
	n[2], n[3] = 0, 0
	binary.BigEndian.PutUint64(n[4:], ctr)
}

// Sealer seals the packets one host sends, for one start of the host. It
// is not safe for concurrent use: the daemon's loop owns one.
type Sealer struct {
	ring   *Keyring
	prefix [prefixLen]byte
	keys   []startKeys // by domain index: this start's AEADs
	ctr    []uint64    // by destination host: the next counter
	sealed uint64
	nonce  [gcmNonceLen]byte // scratch, so no per-packet allocation
	ad     []byte
}

// NewSealer makes a Sealer for one start of a host. epoch names the
// start and must grow from one start of the host to the next (the daemon
// passes its start time, in nanoseconds since the Unix epoch): a receiver
// takes a sender's packets from its newest start only, so a capture of an
// earlier start replays nothing. The rest of the nonce prefix is read from
// random (crypto/rand.Reader in the daemon); the start's keys are derived
// from the prefix.
func NewSealer(ring *Keyring, random io.Reader, epoch uint64) (*Sealer, error) {
	s := &Sealer{ring: ring, ad: make([]byte, 0, 256), keys: make([]startKeys, ring.n)}
	binary.BigEndian.PutUint64(s.prefix[:], epoch)
	if _, err := io.ReadFull(random, s.prefix[epochLen:]); err != nil {
		return nil, fmt.Errorf("tss: nonce prefix: %w", err)
	}
	for _, dk := range ring.domains {
		k, err := dk.derive(s.prefix[:])
		if err != nil {
			return nil, err
		}
		s.keys[dk.idx] = k
	}
	return s, nil
}

// Sealed returns how many packets s has sealed.
func (s *Sealer) Sealed() uint64 { return s.sealed }

// Headroom is where SealInPlace wants the plain packet in its buffer: the
// sealed packet is the header, the sublayer's extension (Headroom bytes)
// and the payload where it already was, so the payload is encrypted where
// it lies.
const Headroom = wire.SealExtLen

// Seal appends pkt, a valid plain packet of any type but PAUSE, sealed
// for the domain of its destination host, to dst and returns the extended
// slice. The spare capacity of dst must not overlap pkt. It allocates
// only if dst lacks capacity (len(pkt) + wire.SealOverhead), and the
// first time it seals for a destination host above every earlier one.
// SealInPlace does the same without copying the payload first.
func (s *Sealer) Seal(dst, pkt []byte) ([]byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, Headroom+len(pkt)+wire.SealTagLen)
	buf := dst[start : start+Headroom+len(pkt)]
	copy(buf[Headroom:], pkt)
	out, err := s.SealInPlace(buf, len(pkt))
	if err != nil {
		return dst[:start], err
	}
	return dst[:start+len(out)], nil
}

// SealInPlace seals the plain packet of n bytes at buf[Headroom:] for the
// domain of its destination host, in buf, and returns the sealed packet,
// which starts at buf[0]. buf's capacity must hold Headroom + n +
// wire.SealTagLen bytes. Nothing is copied but the header: the payload is
// encrypted where it lies. A refusal (the sentinel errors of Seal) leaves
// the plain packet where it was. It allocates nothing but the first time
// it seals for a destination host above every earlier one.
func (s *Sealer) SealInPlace(buf []byte, n int) ([]byte, error) {
	return s.seal(buf, n, nil, false)
}

// SealGather is SealInPlace for a data packet whose payload lies
// elsewhere (nic.Engine.TransmitGather: a view of registered memory):
// buf[Headroom:Headroom+n] holds the packet's header alone, and the
// payload is encrypted from where it lies into buf behind the header, one
// pass over the bytes instead of a copy and an encryption in place. The
// sealed packet is the one SealInPlace makes of the header and payload
// laid out together, and starts at buf[0]; buf's capacity must hold
// Headroom + n + len(payload) + wire.SealTagLen bytes, and payload must
// not overlap buf. With an empty payload it is SealInPlace.
func (s *Sealer) SealGather(buf []byte, n int, payload []byte) ([]byte, error) {
	if len(payload) == 0 {
		return s.seal(buf, n, nil, false)
	}
	return s.seal(buf, n, payload, true)
}

func (s *Sealer) seal(buf []byte, n int, payload []byte, gather bool) ([]byte, error) {
	if n < 0 || Headroom+n > len(buf) {
		return nil, fmt.Errorf("%w: a %d-byte packet in a %d-byte buffer with %d bytes of headroom", ErrNotSealable, n, len(buf), Headroom)
	}
	pkt := buf[Headroom : Headroom+n]
	t, hl, err := header(pkt)
	if err != nil {
		return nil, err
	}
	if t == wire.TypePause || wire.Sealed(pkt) {
		return nil, fmt.Errorf("%w: %v (sealed already: %v)", ErrNotSealable, t, wire.Sealed(pkt))
	}
	hasBody := t == wire.TypeData && pkt[1]&wire.DataTrimmed == 0
	if (!hasBody || gather) && len(pkt) != hl {
		return nil, fmt.Errorf("%w: %v of %d bytes carries more than its %d-byte header", ErrNotSealable, t, len(pkt), hl)
	}
	if gather && !hasBody {
		return nil, fmt.Errorf("%w: a %d-byte payload behind a %v that carries none", ErrNotSealable, len(payload), t)
	}
	if cap(buf) < Headroom+n+len(payload)+wire.SealTagLen && hasBody {
		return nil, fmt.Errorf("%w: no room for the payload tag", ErrNotSealable)
	}
	to := wire.Header(pkt).Dst()
	dk := s.ring.of(to)
	if dk == nil {
		return nil, fmt.Errorf("%w: host %d", ErrNoDomain, to)
	}
	if int(to) >= len(s.ctr) {
		s.ctr = append(s.ctr, make([]uint64, int(to)+1-len(s.ctr))...)
	}
	ctr := s.ctr[to]
	if ctr == ^uint64(0) {
		return nil, ErrNonceSpace
	}
	s.ctr[to]++
	s.sealed++
	putGCMNonce(&s.nonce, to, ctr)
	k := &s.keys[dk.idx]

	// The header moves to the front, the extension follows it and ends
	// where the payload starts.
	copy(buf[:hl], pkt[:hl])
	buf[1] |= wire.FlagSealed
	ext := buf[hl : hl+Headroom]
	binary.BigEndian.PutUint32(ext[extDomain:], dk.id)
	copy(ext[extNonce:], s.prefix[:])
	binary.BigEndian.PutUint64(ext[extNonce+ctrOff:], ctr)
	ad := append(s.ad[:0], buf[:hl+adExt]...)
	ad[1] &^= wire.SwitchMutableFlags(t)
	s.ad = ad
	k.header.Seal(ext[extTag:extTag], s.nonce[:], nil, ad)
	end := hl + Headroom
	switch {
	case gather:
		end += len(k.body.Seal(buf[end:end], s.nonce[:], payload, ad))
	case hasBody:
		body := buf[end : Headroom+n]
		end += len(k.body.Seal(body[:0], s.nonce[:], body, ad))
	}
	return buf[:end], nil
}

// Opener opens the packets one host receives, and refuses replays: it
// keeps, per sender and domain, the sender's newest start and a window of
// the counters it has opened (a bitmap, as RFC 6479 and WireGuard keep
// one per peer). It is not safe for concurrent use: the daemon's loop
// owns one.
type Opener struct {
	ring    *Keyring
	peers   map[uint64]*peer // by domain id << 16 | source host
	ad      []byte
	tag     []byte
	nonce   [gcmNonceLen]byte
	scratch []byte // Open's copy of the packet
	// macs are HMAC-SHA256 keyed with each domain's PRK, by domain index:
	// a new start's subkeys are expanded with them.
	macs []hash.Hash
	// cands caches the keys of the last few starts that were not a
	// peer's current one, so a burst of a new start's first packets, or
	// of forgeries naming a few starts, derives each start's keys once;
	// next is the slot the next start takes.
	cands [candStarts]candidate
	next  int
	refs  [len(reasons)]refusal // by reason: what OpenInPlace returns
}

// candStarts is how many sender starts that are not (yet) a peer's
// current one an Opener keeps the keys of.
const candStarts = 8

// candidate is a sender start an Opener derived keys for before it opened
// a packet of it: the header AEAD at once, the payload AEAD only once a
// header tag authenticated under it, so a forgery naming a new start costs
// one subkey, not two.
type candidate struct {
	domain uint32
	prefix [prefixLen]byte
	keys   startKeys
	ok     bool
}

// peer is what an Opener keeps of one sender in one domain: its current
// start's nonce prefix and keys, and the window of the counters opened.
type peer struct {
	prefix [prefixLen]byte
	keys   startKeys
	win    window
	starts uint32 // the sender's starts this Opener took, its current one included
}

// NewOpener makes an Opener for ring's domains.
func NewOpener(ring *Keyring) *Opener {
	o := &Opener{ring: ring, peers: map[uint64]*peer{}, ad: make([]byte, 0, 256), tag: make([]byte, 0, wire.SealTagLen),
		macs: make([]hash.Hash, ring.n)}
	for _, dk := range ring.domains {
		o.macs[dk.idx] = hmac.New(sha256.New, dk.prk)
	}
	return o
}

// candidate returns the cached keys of the start whose nonce prefix is
// prefix in domain dk, deriving its header AEAD into the oldest slot if
// it is not cached.
func (o *Opener) candidate(dk *domainKeys, prefix []byte) (*candidate, error) {
	for i := range o.cands {
		if c := &o.cands[i]; c.ok && c.domain == dk.id && string(prefix) == string(c.prefix[:]) {
			return c, nil
		}
	}
	h, err := dk.subkey(o.macs[dk.idx], infoHeaderTag, prefix)
	if err != nil {
		return nil, err
	}
	c := &o.cands[o.next]
	o.next = (o.next + 1) % candStarts
	*c = candidate{domain: dk.id, keys: startKeys{header: h}, ok: true}
	copy(c.prefix[:], prefix)
	return c, nil
}

// Opened describes what Open authenticated.
type Opened struct {
	Domain  uint32
	Trimmed bool // a trimmed DATA header: only the header tag was there to check
	// NewStart is set on the first packet opened from a sender start: the
	// sender's first, or the first after it restarted.
	NewStart bool
	// Start and Counter place the packet in its sender's output: Start
	// numbers the sender starts this Opener took (1 for the first it
	// heard), Counter is the packet's counter in its start. A packet that
	// opens after another from the same sender and domain with a smaller
	// (Start, Counter) left its sender later: the sender sealed it later.
	// nic.Engine.ReceiveOrdered binds flows to incarnations with it.
	Start   uint32
	Counter uint64
}

// Open authenticates the sealed packet b and appends the plain packet
// (header with FlagSealed cleared, payload decrypted) to dst. The spare
// capacity of dst must not overlap b, and b is not changed. A refusal
// wraps one of the sentinel errors (Reason names it) and appends nothing.
// It allocates only if dst lacks capacity, or when b is longer than every
// packet before it (it opens a copy); OpenInPlace does the same in b's own
// storage, without the copy.
func (o *Opener) Open(dst, b []byte) ([]byte, Opened, error) {
	o.scratch = append(o.scratch[:0], b...)
	out, info, err := o.OpenInPlace(o.scratch)
	if err != nil {
		return dst, Opened{}, err
	}
	return append(dst, out...), info, nil
}

// OpenInPlace authenticates the sealed packet b and decrypts it in b: the
// plain packet it returns is b[Headroom:Headroom+len], the payload
// decrypted where it lay and the header (FlagSealed cleared) moved up to
// it. After a refusal b's contents are undefined. A refusal allocates
// nothing (but a datagram too short for its type's header): the error is
// the Opener's own for its reason, whose message, if read later, is that
// of the latest refusal for the same reason.
//
// The checks, in order, the cheapest first: framing; the domain is one
// this host holds, and the source host's (this refuses nothing secret:
// every packet names its domain and source host in the clear); the nonce
// is not a replay (ErrReplayed: a counter this Opener opened from the
// sender's current start, one a window or more behind its newest, or a
// start no later than the current one), before any cryptography; the
// header tag, under the header subkey alone (of a start that is not the
// sender's current one, cached or derived: one HMAC and one AES key
// schedule), before the payload subkey is derived or anything is
// decrypted; then the payload tag. Only a packet that passes every check
// is entered in the window, so a forgery moves nothing.
func (o *Opener) OpenInPlace(b []byte) ([]byte, Opened, error) {
	t, hl, err := header(b)
	if err != nil {
		return nil, Opened{}, err
	}
	if !wire.Sealed(b) {
		return nil, Opened{}, o.refused(ErrUnsealed, t, "%[1]v", 0, 0)
	}
	if len(b) < hl+wire.SealExtLen {
		return nil, Opened{}, o.refused(ErrMalformed, t, "sealed %[1]v of %[2]d bytes, need %[3]d", uint64(len(b)), uint64(hl+wire.SealExtLen))
	}
	ext := b[hl:]
	id := binary.BigEndian.Uint32(ext[extDomain:])
	dk := o.ring.domains[id]
	if dk == nil {
		return nil, Opened{}, o.refused(ErrUnknownDomain, t, "%[1]v sealed for domain %[2]d", uint64(id), 0)
	}
	h := wire.Header(b)
	src := h.Src()
	if sd := o.ring.of(src); sd != dk {
		return nil, Opened{}, o.refused(ErrWrongDomain, t, "%[1]v from host %[2]d sealed for domain %[3]d", uint64(src), uint64(id))
	}
	nonce := ext[extNonce:extTag]
	prefix := nonce[:prefixLen]
	ctr := binary.BigEndian.Uint64(nonce[ctrOff:])
	key := uint64(id)<<16 | uint64(src)
	p := o.peers[key]
	var keys *startKeys
	var cand *candidate
	newStart := p == nil || string(prefix) != string(p.prefix[:])
	if !newStart {
		if !p.win.fresh(ctr) {
			return nil, Opened{}, o.refused(ErrReplayed, t, "%[1]v from host %[2]d, counter %[3]d", uint64(src), ctr)
		}
		keys = &p.keys
	} else {
		if p != nil && binary.BigEndian.Uint64(prefix) <= binary.BigEndian.Uint64(p.prefix[:]) {
			return nil, Opened{}, o.refused(ErrReplayed, t, "%[1]v from an earlier start of host %[2]d", uint64(src), 0)
		}
		if cand, err = o.candidate(dk, prefix); err != nil {
			return nil, Opened{}, err
		}
		keys = &cand.keys
	}
	putGCMNonce(&o.nonce, h.Dst(), ctr)
	ad := append(o.ad[:0], b[:hl+adExt]...)
	ad[1] &^= wire.SwitchMutableFlags(t)
	o.ad = ad
	if _, err := keys.header.Open(o.tag[:0], o.nonce[:], ext[extTag:wire.SealExtLen], ad); err != nil {
		return nil, Opened{}, o.refused(ErrHeaderTag, t, "%[1]v in domain %[2]d", uint64(id), 0)
	}
	if cand != nil && keys.body == nil {
		// The header authenticated under this start's key: a key holder
		// sealed it, and the payload subkey is worth deriving.
		if keys.body, err = dk.subkey(o.macs[dk.idx], infoPayloadKey, prefix); err != nil {
			return nil, Opened{}, err
		}
	}
	body := ext[wire.SealExtLen:]
	trimmed := t == wire.TypeData && b[1]&wire.DataTrimmed != 0
	hasBody := t == wire.TypeData && !trimmed
	switch {
	case hasBody && len(body) < wire.SealTagLen:
		return nil, Opened{}, o.refused(ErrMalformed, t, "sealed %[1]v without its payload tag", 0, 0)
	case !hasBody && len(body) != 0:
		return nil, Opened{}, o.refused(ErrMalformed, t, "%[2]d bytes after a sealed %[1]v header", uint64(len(body)), 0)
	}
	n := 0
	if hasBody {
		plain, err := keys.body.Open(body[:0], o.nonce[:], body, ad)
		if err != nil {
			return nil, Opened{}, o.refused(ErrPayloadTag, t, "%[1]v in domain %[2]d", uint64(id), 0)
		}
		n = len(plain)
	}
	out := b[Headroom : Headroom+hl+n]
	copy(out[:hl], b[:hl])
	out[1] &^= wire.FlagSealed
	if newStart {
		if p == nil {
			p = new(peer)
			o.peers[key] = p
		}
		p.prefix, p.keys, p.win = cand.prefix, cand.keys, window{}
		p.starts++
		cand.ok = false
	}
	p.win.mark(ctr)
	return out, Opened{Domain: id, Trimmed: trimmed, NewStart: newStart, Start: p.starts, Counter: ctr}, nil
}

// The replay window, after RFC 6479: a ring of 64-bit blocks of which the
// block of the newest counter is the head; a counter is fresh if it is
// above the newest, or less than windowLen behind it and not yet marked.
const (
	windowBlocks = 128
	// WindowLen is how far behind the newest counter opened from a sender
	// a packet is still taken, if not opened before: a packet the fabric
	// reorders behind more than this many later ones from its sender to
	// the same host is refused as a replay.
	WindowLen = (windowBlocks - 1) * 64
)

type window struct {
	top  uint64 // the newest counter marked
	any  bool
	bits [windowBlocks]uint64
}

func (w *window) fresh(ctr uint64) bool {
	if !w.any || ctr > w.top {
		return true
	}
	if w.top-ctr >= WindowLen {
		return false
	}
	return w.bits[ctr/64%windowBlocks]&(1<<(ctr%64)) == 0
}

// mark enters ctr, which fresh accepted, in the window.
func (w *window) mark(ctr uint64) {
	if !w.any {
		w.any, w.top = true, ctr
	} else if ctr > w.top {
		cur, next := w.top/64, ctr/64
		for i, n := uint64(1), min(next-cur, windowBlocks); i <= n; i++ {
			w.bits[(cur+i)%windowBlocks] = 0
		}
		w.top = ctr
	}
	w.bits[ctr/64%windowBlocks] |= 1 << (ctr % 64)
}
