// Package tss is FORGIVE's transport security sublayer, in the spirit of
// Ultra Ethernet's TSS: it seals and opens packets for one or more security
// domains with AES-256-GCM, so that a switch still routes, classifies and
// trims a sealed packet without the key, and it refuses replays.
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
// Nonces and keys: a Sealer is one start of a host. Its nonce prefix is the
// start's epoch (the daemon's start time) and 64 random bits, and each
// packet carries the prefix and a counter of the packets sealed for its
// destination host. HKDF-SHA-256 derives, from the domain's 32-byte master
// key, a header-tag key and a payload key per sender start (the info names
// the use, the domain and the prefix), so the header tag and the payload
// never use one key, no two starts share a key, and under one key the
// AES-GCM nonce (destination host and counter) never repeats.
//
// Replay: an Opener keeps, per sender and domain, the sender's newest start
// and a window of the counters it opened (WindowLen, a bitmap after RFC
// 6479, as WireGuard keeps one per peer). A packet already opened, one a
// window or more behind the newest, or one of an earlier start is refused
// as ErrReplayed. A dead start's capture, CONNECT included, therefore
// replays nothing once its sender has started again, and a live start's
// replays nothing twice.
//
// Like wire, tss is pure: no I/O and no clock. The epoch and the randomness
// for the nonce prefix come from the caller (the daemon's start time and
// crypto/rand). It imports wire and the crypto libraries only.
package tss
