package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
)

// Sentinel errors; see the package documentation.
var (
	// ErrConflict is what a Receiver wraps to report a chain conflict (a
	// second successor of an event, a sequence already taken). The HTTPS
	// binding answers it with 409, the A2A binding with a conflict error;
	// the sending side's error wraps it again.
	ErrConflict = errors.New("delivery: the receiver reports a chain conflict")
	// ErrUnavailable marks a failure worth retrying later.
	ErrUnavailable = errors.New("delivery: peer unavailable")
	// ErrRejected marks a carrier request the peer refused for good.
	ErrRejected = errors.New("delivery: peer rejected the request")
	// ErrQueued is returned by Outbox.Send when the first attempt did not
	// deliver and the message waits in the outbox.
	ErrQueued = errors.New("delivery: queued for retry")
)

// Receiver is the receiving application's hook. from is the peer
// organisation, established by the pinned client certificate of the
// request, never by anything in the message; transactionID is the
// message's correlation id; msg is its objects' exact canonical bytes,
// checked by the carrier (Check) or to be checked by the receiver (Raw).
// The reply objects travel back to the sender in the
// carrier's response. An error that wraps ErrConflict is a chain conflict;
// a *reason.Refusal is a refusal with codes; anything else is a failure
// the sender retries.
type Receiver interface {
	Receive(ctx context.Context, from, transactionID string, msg Message) (reply [][]byte, err error)
}

// ReceiverFunc adapts a function to Receiver.
type ReceiverFunc func(ctx context.Context, from, transactionID string, msg Message) ([][]byte, error)

// Receive calls f.
func (f ReceiverFunc) Receive(ctx context.Context, from, transactionID string, msg Message) ([][]byte, error) {
	return f(ctx, from, transactionID, msg)
}

// Transport is one carrier's sending side: a binding's client. Deliver
// runs the capability check, sends one message to peer and returns the
// reply, as the carrier checked it (Check).
type Transport interface {
	Deliver(ctx context.Context, peer, transactionID string, objects [][]byte) (reply Message, err error)
}

// Message is one message's objects as a carrier hands them on: their
// exact bytes, and, when the carrier checked them (Check), the value it
// decoded each to. The values travel with the bytes they were decoded
// from, so a receiver takes a value only together with its bytes; they
// are shared from here on, and only read.
type Message struct {
	Objects [][]byte
	values  []map[string]any
}

// Raw is a message of bytes no carrier checked: its receiver runs
// CheckMessage on them itself.
func Raw(objects [][]byte) Message { return Message{Objects: objects} }

// Check runs CheckMessage on objects and returns them as a checked
// message, with the values it decoded them to.
func Check(transactionID string, objects [][]byte) (Message, error) {
	values, err := CheckMessageDecoded(transactionID, objects)
	if err != nil {
		return Message{}, err
	}
	return Message{Objects: objects, values: values}, nil
}

// Checked reports whether a carrier ran CheckMessage on m's bytes (Check).
func (m Message) Checked() bool { return m.values != nil }

// Value returns the value the carrier that checked m decoded its i-th
// object to, or nil.
func (m Message) Value(i int) map[string]any {
	if i < 0 || i >= len(m.values) {
		return nil
	}
	return m.values[i]
}

// KeyExchanger fetches a counterparty's key records on first contact
// (peering.TrustedKeys implements it).
type KeyExchanger interface {
	EnsureKeys(ctx context.Context, org string) error
}

// MessageKey identifies a message for duplicate detection: the SHA-256,
// as lowercase hex, of "a202-message", a NUL, the transaction id, a NUL,
// and the 32-byte SHA-256 of each object's exact bytes in order. The NULs
// and the fixed digest length make the encoding unambiguous.
func MessageKey(transactionID string, objects [][]byte) string {
	h := sha256.New()
	h.Write([]byte("a202-message\x00"))
	h.Write([]byte(transactionID))
	h.Write([]byte{0})
	for _, o := range objects {
		sum := sha256.Sum256(o)
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// envelopeMembers are the top-level members of the kernel envelope
// (kernel schema, canonical model §3). The envelope is closed, so a
// member outside this set, such as a task, context or message id a
// carrier copied in, is refused (binding §5.4).
var envelopeMembers = map[string]bool{
	"spec_version": true, "id": true, "object_type": true, "version": true,
	"created_at": true, "created_by": true, "transaction_id": true,
	"previous_version_id": true, "content_hash": true, "signatures": true,
	"payload": true, "kernel_annotations": true,
}

// CheckMessage applies the carrier rules of binding §5 and §6.3 to a
// received message, on the bytes as received:
//
//   - at least one object;
//   - each object decodes under the strict rules of package canonical and
//     is already in canonical form (the bytes that were signed are the
//     bytes that travel; a re-serialisation is refused, never repaired);
//   - each object's top-level members are the kernel envelope's, so no
//     carrier framing sits inside the signed bytes;
//   - each object's envelope transaction_id, when not null, equals the
//     message's transaction id (A202-STREAM-MISMATCH otherwise: the
//     envelope is authoritative and the object is not processed).
//
// Refusals are *reason.Refusal values; those without a code are kernel
// validation refusals. The meaning of the objects (schemas, signatures,
// guards) is not judged here.
func CheckMessage(transactionID string, objects [][]byte) error {
	_, err := CheckMessageDecoded(transactionID, objects)
	return err
}

// CheckMessageDecoded is CheckMessage, returning on success each object's
// value as it decoded it, in order: a carrier hands them to the receiver
// with the bytes (Check), which then need not decode them again.
func CheckMessageDecoded(transactionID string, objects [][]byte) ([]map[string]any, error) {
	if len(objects) == 0 {
		return nil, reason.Refuse("a message carries at least one A202 object")
	}
	values := make([]map[string]any, len(objects))
	for i, b := range objects {
		obj, err := canonical.DecodeCanonical(b)
		if errors.Is(err, canonical.ErrNotCanonical) {
			return nil, reason.Refuse(fmt.Sprintf("object %d is not in canonical form (RFC 8785); canonical bytes are the object, binding §5.2", i))
		}
		if err != nil {
			return nil, reason.Refuse(fmt.Sprintf("object %d: %v", i, err))
		}
		if err := checkObject(transactionID, i, obj); err != nil {
			return nil, err
		}
		values[i] = obj
	}
	return values, nil
}

// CheckDecoded applies the rules of CheckMessage that judge an object's
// members (the kernel envelope's, the correlation id) to objects already
// decoded from bytes this instance made canonical itself (canonical.Marshal
// writes nothing else): the sending side's check of its own message
// before it is queued, without decoding it again.
func CheckDecoded(transactionID string, objects []map[string]any) error {
	if len(objects) == 0 {
		return reason.Refuse("a message carries at least one A202 object")
	}
	for i, obj := range objects {
		if err := checkObject(transactionID, i, obj); err != nil {
			return err
		}
	}
	return nil
}

// checkObject is CheckMessage's rule for one decoded object, the i-th.
func checkObject(transactionID string, i int, obj map[string]any) error {
	for k := range obj {
		if !envelopeMembers[k] {
			return reason.Refuse(fmt.Sprintf("object %d carries member %q outside the kernel envelope; carrier metadata never sits inside signed bytes, binding §5.4", i, k))
		}
	}
	switch txn := obj["transaction_id"].(type) {
	case nil:
	case string:
		if txn != transactionID {
			return reason.Refusef(reason.StreamMismatch, "object %d belongs to transaction %q, the message is correlated to %q", i, txn, transactionID)
		}
	default:
		return reason.Refuse(fmt.Sprintf("object %d: transaction_id is not a string or null", i))
	}
	return nil
}

// Permanent reports whether err means the message will never be
// delivered as it is: a refusal, a conflict or a rejection, unless it
// also wraps ErrUnavailable. Anything else is worth retrying, because
// losing a message is worse than trying it again.
func Permanent(err error) bool {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return false
	}
	return errors.Is(err, reason.ErrRefused) || errors.Is(err, ErrConflict) || errors.Is(err, ErrRejected)
}
