// Package tss is FORGIVE's transport security sublayer, in the spirit of
// Ultra Ethernet's TSS: it seals and opens packets for one or more security
// domains with XChaCha20-Poly1305 (golang.org/x/crypto), so that a switch
// still routes, classifies and trims a sealed packet without the key.
//
// A sealed packet keeps its FORGIVE header in plaintext (with
// wire.FlagSealed set) and appends, after the header, the domain id, a
// 24-byte nonce and a header tag; a DATA packet's payload follows as
// ciphertext with its own tag (docs/wire.md, "Security sublayer"). The
// header tag authenticates the header, the domain and the nonce, with the
// bits a switch may change (wire.SwitchMutableFlags: DATA's trimmed flag)
// masked out; so a trimmed sealed packet, which keeps header, domain,
// nonce and header tag, still authenticates. The payload tag covers the
// payload and the same associated data.
//
// Keys: each domain has a 32-byte master key; HKDF-SHA-256 derives a
// header-tag key and a payload key from it, so the header tag and the
// payload AEAD never use one key with one nonce. Nonces: a Sealer draws a
// random 128-bit prefix when it is made and counts packets in the last 64
// bits, so every seal (a retransmission too, whose flags differ) has a
// fresh nonce, on every host of a domain and across restarts, with a
// collision probability below 2^-128 per pair of Sealers.
//
// Not covered here: replay. A captured sealed packet sent again
// authenticates; the engine's PSN window, duplicate detection and flow
// tags decide what a replay can do (docs/security.md).
//
// Like wire, tss is pure: no I/O and no clock. The randomness for the
// nonce prefix comes from the io.Reader the caller passes (crypto/rand in
// the daemon). It imports wire and the crypto libraries only.
package tss
