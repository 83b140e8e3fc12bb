// Package https carries A202 objects over plain HTTPS, for a party that
// does not run A2A (A2A carrier binding v0.1 §7). Like the A2A binding it
// adapts the carrier and holds no commercial rule; it shares the delivery
// layer (package delivery) with it: the same capability check, the same
// checks on received bytes, the same inbox and outbox.
//
// # Endpoints (all under /a202/, on the peer listener, HTTPS only)
//
//	GET  /a202/capabilities     the capability preflight (spec-map D11);
//	                            public, 200 with
//	                            {"uri": "https://schemas.a202.org/a2a-ext/commercial/0.1",
//	                             "read_versions": ["0.1"], "write_version": "0.1"}
//	POST /a202/objects          one message (pinned client certificate required)
//	GET  /a202/replies/{key}    the reply to a message this peer sent
//	                            (pinned client certificate required)
//
// # Submitting
//
// The capability check runs first, in both forms §7.2 allows: the sender
// GETs the receiver's preflight and runs delivery.JudgePreflight before
// any object is transmitted, and every POST names the extension URI in
// the A202-Extensions header (comma-separated, like A2A's). The receiver
// requires that header on every POST, echoes it on every answer that
// accepted the activation, and (binding §4.2: each party evaluates the
// other) checks the sender's own preflight before a message reaches the
// application. An absent echo is non-activation: A202-EXTENSION-
// UNSUPPORTED on the sending side.
//
// A message of one object is a POST whose body is exactly the object's
// canonical bytes with Content-Type application/a202-commercial+json. A
// message of several objects is a POST with Content-Type multipart/mixed
// whose parts are, in order, one object each: each part's body is the
// object's canonical bytes and its Content-Type is
// application/a202-commercial+json (this multi-object form is party's;
// the binding fixes only the one-object form). The correlation id travels
// in the A202-Transaction-Id header and must equal every object's
// envelope transaction_id (A202-STREAM-MISMATCH otherwise). Carrier
// framing (request line, headers, multipart headers) is never part of an
// object's bytes.
//
// # Answers
//
// Server.writeError is the one place an outcome becomes a status:
//
//	202 Accepted            received for evaluation; no body. Location names
//	                        /a202/replies/{key}. Never 200 or 201 (§7.4).
//	400 Bad Request         an object or the framing was refused; body
//	                        {"reason_codes": [...]} (empty for a kernel
//	                        validation refusal, binding §5.4)
//	403 Forbidden           no client certificate pinned by this instance
//	404 Not Found           no reply recorded under that key for this peer
//	405 Method Not Allowed  any other method
//	409 Conflict            the application reported a chain conflict
//	                        (delivery.ErrConflict)
//	412 Precondition Failed the capability check or the activation failed;
//	                        body {"reason_codes": ["A202-EXTENSION-UNSUPPORTED"]};
//	                        nothing was accepted or queued (§7.3)
//	413 Content Too Large   the body is over MaxBodyBytes (4 MiB)
//	415 Unsupported Media   neither the A202 media type nor multipart/mixed
//	500                     anything else; the sender retries
//
// # Replies
//
// A202 replies (a countersigned event, say) are objects, and §7.4 defines
// no 202 body, so a reply travels separately: the receiving application's
// reply is recorded in the inbox under the message key
// (delivery.MessageKey), and the sender fetches it with GET on the
// Location of the 202, which answers 200 with a multipart/mixed body of
// the reply objects (no parts for an empty reply). Only the peer that
// sent the message can fetch its reply. If the fetch fails the sender
// posts the message again; the inbox recognises it and answers 202 with
// the same Location, so the reply is never computed twice. Every answer
// the receiver gives is recorded under the message's key, including one
// it draws from its record rather than from what the message moved (the
// same event sent again in another message, an own event come back
// countersigned a second time): a 202 always names a Location that
// answers, with the objects A2A would have carried in its response.
package https
