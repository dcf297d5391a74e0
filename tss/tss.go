package tss

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"golang.org/x/crypto/chacha20poly1305"

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
)

// Reason returns the counter name of a refusal returned by Open or Seal:
// "unsealed", "unknown_domain", "wrong_domain", "header_tag",
// "payload_tag", "malformed", "no_domain", "not_sealable",
// "nonce_space"; "" for nil or another error.
func Reason(err error) string {
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
}

// HKDF parameters: the salt names the protocol and its version, the info
// names the subkey's use and the domain, so no two uses or domains share
// a key even if two domains were given the same master key.
const (
	hkdfSalt       = "FORGIVE TSS v1"
	infoHeaderTag  = "header tag"
	infoPayloadKey = "payload"
)

type domainKeys struct {
	id     uint32
	header cipher.AEAD // authenticates only: empty plaintext, header as associated data
	body   cipher.AEAD
}

// Keyring holds the subkeys of a host's domains and which domain each host
// belongs to. It is read-only once made and safe for concurrent use.
type Keyring struct {
	domains map[uint32]*domainKeys
	byHost  map[uint16]*domainKeys
	dflt    *domainKeys
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
		dk, err := derive(d)
		if err != nil {
			return nil, err
		}
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

func derive(d Domain) (*domainKeys, error) {
	var id [4]byte
	binary.BigEndian.PutUint32(id[:], d.ID)
	sub := func(use string) (cipher.AEAD, error) {
		key, err := hkdf.Key(sha256.New, d.Key[:], []byte(hkdfSalt), use+string(id[:]), chacha20poly1305.KeySize)
		if err != nil {
			return nil, fmt.Errorf("tss: derive %s key of domain %d: %w", use, d.ID, err)
		}
		return chacha20poly1305.NewX(key)
	}
	h, err := sub(infoHeaderTag)
	if err != nil {
		return nil, err
	}
	b, err := sub(infoPayloadKey)
	if err != nil {
		return nil, err
	}
	return &domainKeys{id: d.ID, header: h, body: b}, nil
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
// header (wire.HeaderLen).
const (
	extDomain = 0
	extNonce  = extDomain + wire.SealDomainLen
	extTag    = extNonce + wire.SealNonceLen
	// adExt is how much of the extension the tags authenticate: the
	// domain and the nonce.
	adExt = extTag

	prefixLen = wire.SealNonceLen - 8
)

// header checks the header of b and returns its type and length.
func header(b []byte) (wire.Type, int, error) {
	t, err := wire.Peek(b)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	hl, ok := wire.HeaderLen(t)
	if !ok {
		return 0, 0, fmt.Errorf("%w: %v has no header length", ErrMalformed, t)
	}
	if len(b) < hl {
		return 0, 0, fmt.Errorf("%w: %v of %d bytes, header is %d", ErrMalformed, t, len(b), hl)
	}
	return t, hl, nil
}

// Sealer seals the packets one host sends. It is not safe for concurrent
// use: the daemon's loop owns one.
type Sealer struct {
	ring   *Keyring
	prefix [prefixLen]byte
	ctr    uint64
	nonce  []byte // scratch, so no per-packet allocation
	ad     []byte
}

// NewSealer makes a Sealer whose nonces start with a prefix read from
// random (crypto/rand.Reader in the daemon).
func NewSealer(ring *Keyring, random io.Reader) (*Sealer, error) {
	s := &Sealer{ring: ring, nonce: make([]byte, wire.SealNonceLen), ad: make([]byte, 0, 256)}
	if _, err := io.ReadFull(random, s.prefix[:]); err != nil {
		return nil, fmt.Errorf("tss: nonce prefix: %w", err)
	}
	return s, nil
}

// Sealed returns how many packets s has sealed.
func (s *Sealer) Sealed() uint64 { return s.ctr }

// Seal appends pkt, a valid plain packet of any type but PAUSE, sealed
// for the domain of its destination host, to dst and returns the extended
// slice. The spare capacity of dst must not overlap pkt. It allocates
// only if dst lacks capacity (len(pkt) + wire.SealOverhead).
func (s *Sealer) Seal(dst, pkt []byte) ([]byte, error) {
	t, hl, err := header(pkt)
	if err != nil {
		return dst, err
	}
	if t == wire.TypePause || wire.Sealed(pkt) {
		return dst, fmt.Errorf("%w: %v (sealed already: %v)", ErrNotSealable, t, wire.Sealed(pkt))
	}
	mutable := wire.SwitchMutableFlags(t)
	hasBody := t == wire.TypeData && pkt[1]&wire.DataTrimmed == 0
	if !hasBody && len(pkt) != hl {
		return dst, fmt.Errorf("%w: %v of %d bytes carries more than its %d-byte header", ErrNotSealable, t, len(pkt), hl)
	}
	dk := s.ring.of(wire.Header(pkt).Dst())
	if dk == nil {
		return dst, fmt.Errorf("%w: host %d", ErrNoDomain, wire.Header(pkt).Dst())
	}
	if s.ctr == ^uint64(0) {
		return dst, ErrNonceSpace
	}
	copy(s.nonce, s.prefix[:])
	binary.BigEndian.PutUint64(s.nonce[prefixLen:], s.ctr)
	s.ctr++

	start := len(dst)
	dst = append(dst, pkt[:hl]...)
	dst[start+1] |= wire.FlagSealed
	dst = binary.BigEndian.AppendUint32(dst, dk.id)
	dst = append(dst, s.nonce...)
	ad := append(s.ad[:0], dst[start:]...)
	ad[1] &^= mutable
	dst = dk.header.Seal(dst, s.nonce, nil, ad)
	if hasBody {
		dst = dk.body.Seal(dst, s.nonce, pkt[hl:], ad)
	}
	s.ad = ad
	return dst, nil
}

// Opener opens the packets one host receives. It is not safe for
// concurrent use: the daemon's loop owns one.
type Opener struct {
	ring *Keyring
	ad   []byte
	tag  []byte
}

// NewOpener makes an Opener for ring's domains.
func NewOpener(ring *Keyring) *Opener {
	return &Opener{ring: ring, ad: make([]byte, 0, 256), tag: make([]byte, 0, wire.SealTagLen)}
}

// Opened describes what Open authenticated.
type Opened struct {
	Domain  uint32
	Trimmed bool // a trimmed DATA header: only the header tag was there to check
}

// Open authenticates the sealed packet b and appends the plain packet
// (header with FlagSealed cleared, payload decrypted) to dst. The spare
// capacity of dst must not overlap b. A refusal wraps one of the
// sentinel errors (Reason names it) and appends nothing. The header tag is
// checked before anything is decrypted; a packet whose domain is not its
// source host's domain is refused after its header authenticates.
func (o *Opener) Open(dst, b []byte) ([]byte, Opened, error) {
	t, hl, err := header(b)
	if err != nil {
		return dst, Opened{}, err
	}
	if !wire.Sealed(b) {
		return dst, Opened{}, fmt.Errorf("%w: %v", ErrUnsealed, t)
	}
	if len(b) < hl+wire.SealExtLen {
		return dst, Opened{}, fmt.Errorf("%w: sealed %v of %d bytes, need %d", ErrMalformed, t, len(b), hl+wire.SealExtLen)
	}
	ext := b[hl:]
	id := binary.BigEndian.Uint32(ext[extDomain:])
	dk := o.ring.domains[id]
	if dk == nil {
		return dst, Opened{}, fmt.Errorf("%w: %d", ErrUnknownDomain, id)
	}
	nonce := ext[extNonce:extTag]
	ad := append(o.ad[:0], b[:hl+adExt]...)
	ad[1] &^= wire.SwitchMutableFlags(t)
	o.ad = ad
	if _, err := dk.header.Open(o.tag[:0], nonce, ext[extTag:wire.SealExtLen], ad); err != nil {
		return dst, Opened{}, fmt.Errorf("%w: %v in domain %d", ErrHeaderTag, t, id)
	}
	src := wire.Header(b).Src()
	if sd := o.ring.of(src); sd != dk {
		return dst, Opened{}, fmt.Errorf("%w: %v from host %d sealed for domain %d", ErrWrongDomain, t, src, id)
	}
	body := ext[wire.SealExtLen:]
	trimmed := t == wire.TypeData && b[1]&wire.DataTrimmed != 0
	hasBody := t == wire.TypeData && !trimmed
	switch {
	case hasBody && len(body) < wire.SealTagLen:
		return dst, Opened{}, fmt.Errorf("%w: sealed DATA without its payload tag", ErrMalformed)
	case !hasBody && len(body) != 0:
		return dst, Opened{}, fmt.Errorf("%w: %d bytes after a sealed %v header", ErrMalformed, len(body), t)
	}
	start := len(dst)
	out := append(dst, b[:hl]...)
	out[start+1] &^= wire.FlagSealed
	if hasBody {
		out, err = dk.body.Open(out, nonce, body, ad)
		if err != nil {
			return dst, Opened{}, fmt.Errorf("%w: DATA in domain %d", ErrPayloadTag, id)
		}
	}
	return out, Opened{Domain: id, Trimmed: trimmed}, nil
}
