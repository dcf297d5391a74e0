package wire

import (
	"encoding/binary"
	"fmt"
)

// The security sublayer's framing (docs/wire.md, "Security sublayer").
// Package tss seals and opens packets; wire only knows enough of the
// layout for a switch to validate, route and trim a sealed packet without
// the key:
//
//	header (HeaderLen bytes, plaintext, FlagSealed set in byte 1)
//	domain id (4) | nonce (24) | header tag (16)     = SealExtLen bytes
//	payload ciphertext (DATA only, PayloadLen bytes; absent when trimmed)
//	payload tag (16, DATA only; absent when trimmed)
//
// A trimmed sealed DATA packet keeps the header, the domain, the nonce and
// the header tag: TrimmedLen bytes.
const (
	// FlagSealed in the flag byte of every type but PAUSE marks a packet
	// sealed by the security sublayer. The engines never see it: the
	// daemon opens a sealed packet before its engine parses it, and the
	// parsers refuse the bit like any undefined flag.
	FlagSealed uint8 = 0x80

	SealDomainLen = 4  // security domain id
	SealNonceLen  = 24 // the sender start's nonce prefix (16) and a packet counter (8)
	SealTagLen    = 16 // an AES-GCM tag: the header tag, and the payload tag
	// SealExtLen is what the sublayer adds after the header of every
	// sealed packet, and what survives trimming.
	SealExtLen = SealDomainLen + SealNonceLen + SealTagLen
	// SealOverhead is what sealing adds to an untrimmed DATA packet.
	SealOverhead = SealExtLen + SealTagLen
)

// maxHeaderLen bounds HeaderLen over every type; validateSealed copies a
// header into an array of this size.
const maxHeaderLen = 128

// HeaderLen returns the header length of packet type t: for DATA the part
// before the payload (and all a plain trimmed packet keeps), for the
// control types the whole packet. ok is false for an unknown type.
func HeaderLen(t Type) (n int, ok bool) {
	switch t {
	case TypeData:
		return DataLen, true
	case TypeAck:
		return AckLen, true
	case TypeNack:
		return NackLen, true
	case TypeCNP:
		return CNPLen, true
	case TypeProbe:
		return ProbeLen, true
	case TypePause:
		return PauseLen, true
	case TypeConnect, TypeAccept:
		return ConnectLen, true
	}
	return 0, false
}

// SwitchMutableFlags returns the flag bits of type t that a switch may
// change in flight: the trimmed flag of DATA, nothing else. The security
// sublayer's header tag leaves exactly these bits out.
func SwitchMutableFlags(t Type) uint8 {
	if t == TypeData {
		return DataTrimmed
	}
	return 0
}

// Sealed reports whether b carries FlagSealed. It looks at the flag byte
// only; Validate checks the rest.
func Sealed(b []byte) bool {
	return len(b) >= CommonLen && Type(b[offVerType]&typeMask) != TypePause && b[offFlags]&FlagSealed != 0
}

// TrimmedLen returns the length a DATA packet has once trimmed: its header,
// and for a sealed packet the sublayer's domain, nonce and header tag.
// It is ErrNotData for any other packet.
func TrimmedLen(b []byte) (int, error) {
	if len(b) < CommonLen || Type(b[offVerType]&typeMask) != TypeData {
		return 0, ErrNotData
	}
	if b[offFlags]&FlagSealed != 0 {
		return DataLen + SealExtLen, nil
	}
	return DataLen, nil
}

// validateSealed checks the framing of a sealed packet of type t (its
// authenticity is package tss's to check): the header, read as if it were
// plain, must pass Validate, and the length must be what the header says.
func validateSealed(b []byte, t Type) error {
	hl, ok := HeaderLen(t)
	if !ok || t == TypePause {
		return fmt.Errorf("%w: %v cannot be sealed", ErrBadField, t)
	}
	if len(b) < hl {
		return fmt.Errorf("%w: sealed %v is %d bytes, need %d", ErrTooShort, t, len(b), hl+SealExtLen)
	}
	var hdr [maxHeaderLen]byte
	h := hdr[:hl]
	copy(h, b)
	h[offFlags] &^= FlagSealed
	want := hl + SealExtLen
	if t == TypeData {
		// Check the header as the trimmed header it is or may become;
		// the payload is ciphertext and its tag.
		if h[offFlags]&DataTrimmed == 0 {
			want += int(Data(h).PayloadLen()) + SealTagLen
		}
		h[offFlags] |= DataTrimmed
	}
	if _, err := Validate(h); err != nil {
		return fmt.Errorf("sealed %v header: %w", t, err)
	}
	if len(b) < hl+SealExtLen {
		return fmt.Errorf("%w: sealed %v is %d bytes, need %d", ErrTooShort, t, len(b), hl+SealExtLen)
	}
	if len(b) != want {
		return fmt.Errorf("%w: sealed %v is %d bytes, header says %d", ErrBadLength, t, len(b), want)
	}
	return nil
}

// SealExt is the sublayer's extension of a sealed packet, as a switch or a
// decoder reads it without the key.
type SealExt struct {
	Domain    uint32
	Nonce     [SealNonceLen]byte
	HeaderTag [SealTagLen]byte
}

// SplitSealed splits a sealed packet into its parts: the header as sent
// (FlagSealed set), the extension, and the body (for untrimmed DATA the
// payload ciphertext and its tag, for every other packet nothing). hdr and
// body alias b. It refuses, with Validate's error, a packet Validate does
// not accept, and a plain packet with ErrBadField.
func SplitSealed(b []byte) (hdr []byte, ext SealExt, body []byte, err error) {
	t, err := Validate(b)
	if err != nil {
		return nil, SealExt{}, nil, err
	}
	if !Sealed(b) {
		return nil, SealExt{}, nil, fmt.Errorf("%w: %v is not sealed", ErrBadField, t)
	}
	hl, _ := HeaderLen(t)
	e := b[hl : hl+SealExtLen]
	ext.Domain = binary.BigEndian.Uint32(e)
	copy(ext.Nonce[:], e[SealDomainLen:])
	copy(ext.HeaderTag[:], e[SealDomainLen+SealNonceLen:])
	return b[:hl], ext, b[hl+SealExtLen:], nil
}

// AppendSealed appends to dst the sealed packet made of hdr, the header of
// a plain packet of any type but PAUSE (FlagSealed clear; for DATA the
// header alone, trimmed or not), the extension ext and body, and returns
// the extended slice. The result must pass Validate, or AppendSealed
// appends nothing and returns Validate's error: it builds exactly the
// packets SplitSealed takes apart, and SplitSealed's parts rebuild the
// packet byte for byte.
func AppendSealed(dst, hdr []byte, ext SealExt, body []byte) ([]byte, error) {
	t, err := Peek(hdr)
	if err != nil {
		return dst, err
	}
	hl, ok := HeaderLen(t)
	if !ok || t == TypePause || len(hdr) != hl {
		return dst, fmt.Errorf("%w: a sealed %v needs its %d-byte header, got %d bytes", ErrBadField, t, hl, len(hdr))
	}
	if hdr[offFlags]&FlagSealed != 0 {
		return dst, fmt.Errorf("%w: %v header carries FlagSealed already", ErrBadField, t)
	}
	start := len(dst)
	dst = append(dst, hdr...)
	dst[start+offFlags] |= FlagSealed
	dst = binary.BigEndian.AppendUint32(dst, ext.Domain)
	dst = append(dst, ext.Nonce[:]...)
	dst = append(dst, ext.HeaderTag[:]...)
	dst = append(dst, body...)
	if _, err := Validate(dst[start:]); err != nil {
		return dst[:start], err
	}
	return dst, nil
}
