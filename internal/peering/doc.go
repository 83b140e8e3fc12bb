// Package peering is how one party instance knows, reaches and recognises
// its counterparties (decisions.md item 14).
//
// # Peer files
//
// Two organisations exchange peer files out of band, like SSH host keys
// (package instance: PeerInfo, ParsePeerFile, AddPeer). A peer file names
// the organisation, its AgentCard URL, the SHA-256 of its TLS certificate
// and the thumbprints (and public JWKs) of its principal keys. `party peer
// add` pins one; Directory reads the pinned files of a state directory.
//
// # TLS, both ways, pinned
//
// Every instance has one self-signed TLS certificate (tls/cert.pem). It is
// the server certificate of its peer listener and also the client
// certificate it presents when it calls a peer, so the certificate's
// private key is the per-peer credential and the peer file's fingerprint
// is what the other side pins in both directions. There are no passwords
// or bearer tokens between instances: a credential that travels can be
// replayed, a TLS key never leaves its host.
//
//   - Calling a peer ([ClientTLSConfig], NewHTTPClient, [Clients]): the
//     connection is accepted only when the peer's leaf certificate has
//     exactly the pinned SHA-256 and is within its validity period. The
//     pin replaces both chain building and the host name check on
//     purpose: the certificate is self-signed (there is no chain to
//     build), and the host name names a place, while the pin names the
//     one key the organisation handed us, which is a strictly stronger
//     statement and keeps working behind a proxy or a renamed host. Only
//     https URLs are fetched and redirects are not followed.
//   - Being called ([ServerTLSConfig], Directory.Authenticate): the listener
//     requests a client certificate without requiring or chain-verifying
//     one, and the HTTP layer maps the presented leaf's SHA-256 to the
//     organisation whose peer file pins it. TLS 1.3 has already checked
//     the client's CertificateVerify, so a presented certificate proves
//     possession of its key. Checking at the HTTP layer rather than in the
//     handshake keeps the public AgentCard and the capability preflight
//     readable by anyone (they are public statements, binding §9), while
//     every endpoint that carries objects refuses a request without a
//     pinned certificate before reading it. A peer file added while the
//     listener runs is picked up at the next request that needs it.
//
// # Agent keys and key records
//
// An agent key is trusted only when its key_record (an envelope object of
// type key_record) is signed, purpose object_issuance, by a principal key
// of the same organisation that the peer file pins ([TrustKeyRecord]). A
// record that claims to be the principal key's own record must carry the
// pinned key itself. TrustedKeys keeps the trusted keys per organisation,
// persists the records in the record (store objects, origin = the peer)
// and refuses, and logs, a record that would bind an already trusted
// key_id to a different key: a key_id names one key for good (as in
// keys.KeySet), so a rotated key comes with a new key_id, and a change
// nobody pinned signed is an attack or a mistake either way.
//
// Key records are exchanged by pull, on first contact: each instance
// serves the key_record objects of its own organisation at
// KeyRecordsPath (GET /a202/key-records, pinned client certificate
// required) as a JSON array whose elements are the records' exact
// canonical bytes, and TrustedKeys.EnsureKeys fetches a counterparty's
// records the first time this instance sends to or receives from it (and
// again on demand, Exchange, when a signature names a key it has not
// seen). A pull keeps key distribution out of the commercial message
// stream, so no transaction ever carries objects that are not its own.
//
// # Revocation records
//
// The same route serves the organisation's revocation records: those of
// its agents and keys to every pinned peer, and those of its mandates
// (commercial mandate §9) to the peers the mandate itself is disclosed
// to (MandateServedTo: the counterparties its scope names, or every
// pinned peer when it names none). Exchange keeps a peer's agent or key
// revocation that TrustRevocationRecord accepts, and a mandate's that
// TrustMandateRevocation accepts: signed by a pinned principal key of
// the peer, created for the peer, accepted by the gate, and about a
// mandate this instance holds as the peer's. Anything else is refused and
// stored nowhere. TrustedKeys.KeepCurrent, which `party serve` runs,
// fetches every pinned peer's records at start and every KeyRefresh, so a
// revocation made while either instance was down reaches the other once
// both are up, without a message between them: the issuer serves it for
// as long as it holds it, and the other asks until it has it.
//
// # Failure modes
//
// Authenticate returns an error wrapping ErrUnauthenticated when no
// certificate, or an unpinned or expired one, was presented; Peer returns
// ErrUnknownPeer for an organisation with no peer file; TrustKeyRecord
// and TrustedKeys.Add return errors wrapping ErrUntrustedKey. The pinned
// client fails the TLS handshake (an error from the HTTP client) when the
// peer presents any other certificate.
package peering
