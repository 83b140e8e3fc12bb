// Package status publishes and resolves the live status of commercial
// mandates (commercial mandate §3.3, §6.1, §9; decisions.md 8).
//
// A relying party learns that a mandate is active only through its status
// endpoint, which this package serves and resolves. (The revocation
// records the status endpoint carries also travel, as the issuer's signed
// objects, to the counterparties the mandate is disclosed to, among its
// key records, package peering; a record held that way can only make a
// mandate revoked, never active: package org.) It has three parts.
//
// # The status document
//
// The issuing instance answers GET on a mandate's status_endpoint with one
// JSON object (its RFC 8785 bytes):
//
//	{"mandate_id": "mnd_…", "status": "active",
//	 "as_of": "2026-12-02T13:23:39Z", "expires_at": "2026-12-02T13:24:09Z",
//	 "revocation_record": { …the latest signed revocation_record… }}
//
// status is active, suspended, revoked or expired. as_of is when the issuer
// read its store; expires_at is at most MaxAge (60 s) after as_of; both are
// whole-second UTC timestamps. revocation_record is omitted when the mandate
// never changed status. The member set is closed: a document with any other
// member, a missing member, or a wrongly typed one is malformed.
//
// # Serving: Handler over a Store
//
// Handler serves the document for the mandate named in the request path
// (…/<mandate_id>/status, see EndpointFor) from a Store. It answers only
// requests that arrived over TLS: status served over plain HTTP is forgeable
// (§3.3). MemoryStore is an in-memory Store that enforces the status
// transitions of §9 (suspended may return to active; revoked is final).
// NewRevocationRecord builds and signs the revocation_record that every
// status change produces.
//
// # Resolving: Client
//
// Client resolves a status endpoint for a relying party. It connects over
// HTTPS only (an http:// or otherwise non-https URL is refused before any
// connection), trusts only the certificate pool it is given (tls.Config
// RootCAs, so the issuer's certificate is pinned rather than found in the
// system store) and the certificate fingerprints ClientConfig.Pins names,
// follows no redirects, and reads at most MaxDocumentSize
// bytes. A result is usable at instant now only when
//
//	as_of − MaxSkew ≤ now < expires_at,  expires_at − as_of ≤ MaxAge,
//
// the mandate_id is the one asked for, and any revocation_record carried
// names that mandate with the same status. MaxSkew (5 s) is the clock
// disagreement tolerated between issuer and relying party for a document
// that claims to be from the future; it never extends a document's life.
// The client caches a usable document until expires_at and never for more
// than MaxAge after it fetched it, measured on its injected clock, so a
// revocation is seen within 60 seconds. Anything else, including an
// unreachable endpoint, a non-200 answer, a stale, future-dated, malformed
// or mismatched document, is an error carrying
// A202-MANDATE-STATUS-UNRESOLVED: unavailability is never permission.
//
// The client is the evaluator's only source of status for a mandate
// another organisation issued. For its own mandates an instance reads
// the status from its own record at the act instead, as Handler serves
// it, so that its principal's revocation stops its own agent at once
// (package org). A status relayed by the counterparty is never read.
package status
