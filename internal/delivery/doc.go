// Package delivery moves messages of A202 objects between two instances,
// whatever the carrier: it is the layer the A2A binding (bindings/a2a) and
// the plain HTTPS binding (bindings/https) share.
//
// # Messages
//
// A message is a transaction id (the correlation id, binding §6.3; empty
// for objects that belong to no transaction, such as key records) and one
// or more objects, each the exact canonical bytes that were hashed and
// signed. Nothing here parses an object into a value that is used again:
// received bytes are checked as received ([CheckMessage]) and handed on
// unchanged.
//
// # Sending: the outbox
//
// The application (the record engine) enqueues a message inside the
// database transaction of the act it carries (store.Txn.Enqueue), leased
// to this process when the act attempts it at once (Outbox.Lease), so an
// act is never stored without its message. Outbox.Send makes one attempt
// through a Transport (a binding's client) and returns the reply; the
// application stores what the reply moves and deletes the message
// (store.Txn.Delivered) in one transaction, so a reply is never marked
// delivered and then lost. A peer that is down, a refused TLS handshake or
// a restart of either side only delays delivery: Send records the failure
// (Retry: exponential back-off with jitter, bounded by MaxBackoff) and the
// worker (Run, or one pass RunDue) leases the message again when it is due
// and hands it to the Handler, which settles it as the act would have.
// Messages of one transaction to one peer are attempted strictly in
// enqueue order, so a retried event never overtakes its predecessor. A
// refusal by the peer (a *reason.Refusal, ErrConflict or ErrRejected
// without ErrUnavailable) is returned for the application to settle: it
// removes the act and marks the message failed (store.Txn.Failed). Start
// voids the leases a dead predecessor process left behind, so what it was
// delivering is due at once. Pending lists what still waits.
//
// # Receiving: the inbox
//
// Inbox is the Receiver a binding calls. It recognises a redelivery by the
// message key (MessageKey: SHA-256 over the transaction id and the SHA-256
// of each object's exact bytes, in order) and answers it with the reply it
// recorded the first time, without calling the application again. The key
// hashes whole bytes rather than content_hash on purpose: content_hash
// leaves out signatures, so an event and the same event countersigned
// share it, and they are different messages. The application's Receiver
// returns reply objects (a countersigned event, say), which travel back
// synchronously in the carrier's response.
//
// # The capability declaration
//
// ExtensionURI, MediaType and LocalVersions are the A202 extension both
// bindings declare (decisions.md item 13); JudgeDeclaration and
// JudgePreflight run the fail-closed check of binding §3.2 and §4.2 on a
// counterparty's AgentCard extensions or HTTPS preflight document, with
// one refusal code, A202-EXTENSION-UNSUPPORTED, for every failure.
//
// # Errors
//
// Callers match with errors.Is / errors.As:
//
//   - *reason.Refusal: the peer (or a local check) refused with codes;
//     with no codes, a kernel validation refusal (binding §5.4).
//   - ErrConflict: the receiving application reported a chain conflict.
//   - ErrUnavailable: try again later (network, 5xx, an unretrievable
//     capability surface). It may be wrapped together with a refusal: an
//     unretrievable AgentCard is A202-EXTENSION-UNSUPPORTED on the wire
//     and a reason to retry in the outbox.
//   - ErrRejected: the peer refused the carrier request itself (no pinned
//     credential, over-size body, malformed framing).
//   - ErrQueued: the attempt did not deliver and the message waits in the
//     outbox; the worker hands it to the Handler when it is due again.
package delivery
