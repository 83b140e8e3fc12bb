// Package a2a carries A202 objects over A2A (JSON-RPC over HTTPS) with
// github.com/a2aproject/a2a-go v0.3.3, under the A2A carrier binding
// v0.1 and decisions.md item 13. It adapts the carrier and holds no
// commercial rule: what an object means is the receiving application's
// business (delivery.Receiver).
//
// # Declaration
//
// Card returns the AgentCard served at /.well-known/agent-card.json. Its
// capabilities.extensions holds one entry:
//
//	{"uri": "https://schemas.a202.org/a2a-ext/commercial/0.1",
//	 "description": "Exchanges A202 commercial objects ...",
//	 "required": true,
//	 "params": {"read_versions": ["0.1"], "write_version": "0.1"}}
//
// The card's url is the JSON-RPC endpoint, PublicURL + EndpointPath
// (/a2a); input and output modes are the A202 media type.
//
// # The fail-closed capability check
//
// Before the first object goes to a counterparty, Client fetches its card
// from the peer file's agent_card_url over pinned TLS and runs
// delivery.JudgeDeclaration. Each of the four conditions of binding §3.2 —
// no entry, a version declaration that does not parse, no compatible
// version either way, a card that cannot be retrieved — ends the exchange
// with A202-EXTENSION-UNSUPPORTED before any object is sent; the detail
// goes to the local log only, and there is no fallback to a bare A2A
// exchange. The server runs the same check on the sender's card before a
// message reaches the application (binding §4.2: each party evaluates the
// other). A pass is remembered for CheckTTL.
//
// # Activation
//
// Every request names the extension URI under both A2A-Extensions and
// X-A2A-Extensions. The server accepts either header (each may be
// repeated and is a comma-separated list, spaces trimmed). A request that
// does not activate the extension is answered, before anything reaches
// the JSON-RPC layer, with a JSON-RPC error carrying
// A202-EXTENSION-UNSUPPORTED. An activated request is answered with the
// URI echoed under both header names. The client records the echo
// through its RoundTripper and treats an absent echo as non-activation:
// A202-EXTENSION-UNSUPPORTED, whatever the body said.
//
// # Messages
//
// A request is message/send with a message whose parts are one a2a
// FilePart per object, FileBytes with mimeType
// application/a202-commercial+json, holding the object's canonical bytes
// (base64 in the JSON, as A2A encodes bytes). The correlation
// transaction_id sits in message metadata under the extension URI:
//
//	"metadata": {"https://schemas.a202.org/a2a-ext/commercial/0.1":
//	             {"transaction_id": "txn_..."}}
//
// (null for objects of no transaction). The server decodes each part's
// bytes and hands them, unchanged and never re-serialised, to
// delivery.CheckMessage: strict decoding, bytes already canonical, no
// member outside the kernel envelope (carrier framing such as a task id
// inside signed bytes is refused, binding §5.4), and every envelope
// transaction_id equal to the correlation id (A202-STREAM-MISMATCH
// otherwise). Text and data parts are not objects: they are ignored, never
// hashed or verified (binding §5.2). Any other file part is refused.
//
// Both ends read and write message/send in one pass (fast.go): the
// client writes the request a2a-go's JSON-RPC client would write for the
// same message and reads the answer itself, a Message of file parts in
// one pass and anything else (a Task, other members) through a2a-go; the
// server reads a request of exactly that shape in one pass and answers as
// a2a-go's handler would, and hands any other request to a2a-go's handler
// (a2asrv), which decides and answers. a2a-go read each message four times
// over, and A202 objects travel inside it; what is written and read is
// pinned against a2a-go's own encoder and decoder by tests and a fuzzer.
//
// The reply is an A2A Message (role agent) shaped the same way, carrying
// the receiving application's reply objects. The server never creates an
// A2A task: message/send is answered with a Message, and the other task
// methods answer "task not found" or "unsupported". Task state, where a
// peer returns a task anyway, is carrier bookkeeping only and never moves
// a transaction (binding §6.2): the client reads reply objects out of the
// task's artifacts and ignores its state. A result is this request's reply
// only when its JSON-RPC id is the request's (JSON-RPC 2.0 §5); one that
// answers another id, or none, is not taken, and the delivery is rejected
// (delivery.ErrRejected), as a malformed reply is. An error response may
// carry a null id (the request could not be read), and is read as the
// error it is.
//
// # Authentication and limits
//
// The JSON-RPC endpoint serves only pinned peers: a request without a
// client certificate pinned in a peer file is refused with HTTP 403
// before its body is read (peering.Directory.Authenticate). The request
// body is limited to MaxBodyBytes (4 MiB: objects of up to about 3 MiB in
// total once base64-encoded), and a larger one is answered 413. The
// AgentCard is public.
//
// # Errors on the wire
//
// Server.writeError is the one place an error becomes a response. A
// refusal is HTTP 200 with a JSON-RPC error (so an ordinary A2A client
// reads it), code -32602, and data
//
//	{"error": "A202-STREAM-MISMATCH", "a202_reason_codes": ["A202-STREAM-MISMATCH"]}
//
// (an empty code list and error "A202 kernel validation refusal" for a
// refusal without a code). A chain conflict reported by the application
// (delivery.ErrConflict) is code -32000 with data {"error": "conflict",
// "a202_conflict": true}. Anything else is -32603 and means "try again".
// The refusal's detail is logged locally and never sent. The client maps
// these back to *reason.Refusal, delivery.ErrConflict and
// delivery.ErrUnavailable respectively.
package a2a
