package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/partyd/party/internal/canonical"
)

// ObjectInfo is the indexed part of a stored envelope object.
type ObjectInfo struct {
	ID            string
	ObjectType    string
	TransactionID string // "" when the object has none
	ContentHash   string
	Origin        string
}

func objectInfo(body []byte) (ObjectInfo, map[string]any, error) {
	obj, err := canonical.DecodeCanonical(body)
	if errors.Is(err, canonical.ErrNotCanonical) {
		// Stored bytes are the bytes that were hashed and signed; anything
		// else would be a re-serialisation nobody signed.
		return ObjectInfo{}, nil, fmt.Errorf("store: object bytes are not in canonical form")
	}
	if err != nil {
		return ObjectInfo{}, nil, err
	}
	var info ObjectInfo
	info.ID, _ = obj["id"].(string)
	info.ObjectType, _ = obj["object_type"].(string)
	info.TransactionID, _ = obj["transaction_id"].(string)
	info.ContentHash, _ = obj["content_hash"].(string)
	if info.ID == "" || info.ObjectType == "" || info.ContentHash == "" {
		return ObjectInfo{}, nil, fmt.Errorf("store: object lacks id, object_type or content_hash")
	}
	// The index must describe the bytes: a content_hash member that is not
	// the hash of the object would let a replacement change signed content.
	if h, err := canonical.ContentHash(obj); err != nil || h != info.ContentHash {
		return ObjectInfo{}, nil, fmt.Errorf("store: %s carries a content_hash that is not its own", info.ID)
	}
	return info, obj, nil
}

// PutObject stores an envelope object's canonical bytes. Storing the same
// bytes again is a no-op; storing other bytes under an id already held is
// ErrConflict (use ReplaceObject to add a signature).
func (s *Store) PutObject(ctx context.Context, body []byte, origin string) (ObjectInfo, error) {
	var info ObjectInfo
	err := s.Update(ctx, func(t *Txn) error {
		var err error
		info, err = t.PutObject(body, origin)
		return err
	})
	return info, err
}

func putObject(t *Txn, body []byte, origin string) (ObjectInfo, error) {
	info, _, err := objectInfo(body)
	if err != nil {
		return ObjectInfo{}, err
	}
	return putChecked(t, info, body, origin)
}

// putChecked stores body under info, which describes it: the caller
// decoded the bytes strictly, found them canonical and recomputed their
// content hash (PutVerified), or objectInfo did.
func putChecked(t *Txn, info ObjectInfo, body []byte, origin string) (ObjectInfo, error) {
	info.Origin = origin
	var txn any
	if info.TransactionID != "" {
		txn = info.TransactionID
	}
	if txn != nil {
		if err := t.number(info.TransactionID); err != nil {
			return ObjectInfo{}, err
		}
	}
	res, err := t.exec(`INSERT INTO objects(id, object_type, transaction_id, tseq, content_hash, body, origin)
		VALUES (?1, ?2, ?3, `+txnSeqAt(3)+`, ?4, ?5, ?6) ON CONFLICT DO NOTHING`,
		info.ID, info.ObjectType, txn, info.ContentHash, body, origin)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("store: put %s: %w", info.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return info, nil
	}
	cond, args := objectKey(info.TransactionID, info.ID)
	var held []byte
	var hash string
	err = t.queryRow(`SELECT body, content_hash FROM objects WHERE `+cond, args...).Scan(&held, &hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Not under its key: the conflict was on the index of the
		// objects an agent names by id, which another transaction's
		// offer, obligation or dispute holds.
		return ObjectInfo{}, fmt.Errorf("%w: %w: %s", ErrConflict, ErrHeldElsewhere, info.ID)
	case err != nil:
		return ObjectInfo{}, fmt.Errorf("store: put %s: %w", info.ID, err)
	}
	switch {
	case hash != info.ContentHash:
		return ObjectInfo{}, fmt.Errorf("%w: %w: %s", ErrConflict, ErrOtherContent, info.ID)
	case string(held) != string(body):
		// The same content with other signatures (one more, or one
		// fewer): the held copy stands (ReplaceObject adds one).
		return ObjectInfo{}, fmt.Errorf("%w: %s is held with other signatures", ErrConflict, info.ID)
	}
	return info, nil
}

// objectKey is the condition that finds one object by its key (migration
// 26): its transaction and its id, one row's search of objects_by_key
// (keyed by the transaction's local number since migration 29: txnSeq),
// or its id alone for an object bound to no transaction (transaction "":
// a key record, a revocation record), one row's search of
// objects_unbound, which keeps those ids unique.
func objectKey(transactionID, id string) (string, []any) {
	if transactionID == "" {
		return `transaction_id IS NULL AND id = ?`, []any{id}
	}
	return `tseq = ` + txnSeq + ` AND id = ?`, []any{transactionID, id}
}

// txnSeq is the local number of the transaction whose id is the
// parameter (migration 29): what a query of a transaction's objects and
// events compares their key with (tseq = txnSeq). SQLite reads it once a
// statement, one search of transaction_numbers, and then searches the
// table's index by it; NULL (nothing found) for an id never met.
const txnSeq = `(SELECT seq FROM transaction_numbers WHERE id = ?)`

// txnSeqAt is txnSeq for a statement that numbers its parameters: the
// number of the transaction whose id is parameter n.
func txnSeqAt(n int) string {
	return `(SELECT seq FROM transaction_numbers WHERE id = ?` + strconv.Itoa(n) + `)`
}

// number gives transaction id its local number (migration 29) unless it
// has one: one more than the last given (the last entry of
// transaction_numbers' index by number), numbers never given twice. It
// runs before any row keyed by the number is written; t remembers the ids
// it numbered, so an act that stores many objects numbers once.
func (t *Txn) number(id string) error {
	if t.numbered[id] {
		return nil
	}
	_, err := t.exec(`INSERT INTO transaction_numbers(id, seq)
		VALUES (?, (SELECT IFNULL(MAX(seq), 0) + 1 FROM transaction_numbers)) ON CONFLICT DO NOTHING`, id)
	if err != nil {
		return fmt.Errorf("store: number transaction %s: %w", id, err)
	}
	if t.numbered == nil {
		t.numbered = make(map[string]bool)
	}
	t.numbered[id] = true
	return nil
}

// objectQuery is the query for the bytes of one object by its key.
func objectQuery(transactionID, id string) (string, []any) {
	cond, args := objectKey(transactionID, id)
	return `SELECT body FROM objects WHERE ` + cond, args
}

// objectBody scans the bytes objectQuery read for object id, ErrNotFound
// when there is none.
func objectBody(row rowScanner, id string) ([]byte, error) {
	var body []byte
	err := row.Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: object %s", ErrNotFound, id)
	}
	return body, err
}

// ReplaceObject swaps the stored bytes of object id from old to new, for
// adding a countersignature. It is a compare-and-swap: if the stored bytes
// are not old, nothing changes and the error is ErrConflict. The new bytes
// must carry the same content hash (only signatures may change).
func (s *Store) ReplaceObject(ctx context.Context, id string, old, new []byte) error {
	return s.Update(ctx, func(t *Txn) error { return t.ReplaceObject(id, old, new) })
}

// GetObject returns the stored bytes of object id of transaction
// transactionID, or of the object id bound to no transaction when
// transactionID is "". An object is found by its transaction and its id
// (migration 26), never by its id alone: the same id in another
// transaction is another object.
func (s *Store) GetObject(ctx context.Context, transactionID, id string) ([]byte, error) {
	q, args := objectQuery(transactionID, id)
	return objectBody(s.queryRow(ctx, q, args...), id)
}

// NamedObjectTransaction returns the transaction of the offer, obligation
// or dispute id, or ErrNotFound when none is held: how a tool that names
// one by its id alone (an offer to accept, an obligation to perform, a
// dispute to determine) finds the record it acts on. Those three types'
// ids are unique across transactions (migration 26's objects_named), so
// an id names one transaction's object.
func (s *Store) NamedObjectTransaction(ctx context.Context, id string) (string, error) {
	var txn string
	err := s.queryRow(ctx, `SELECT transaction_id FROM objects WHERE id = ? AND object_type IN ('offer', 'obligation', 'dispute')`, id).Scan(&txn)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: no offer, obligation or dispute %s", ErrNotFound, id)
	}
	return txn, err
}

// TransactionObjects returns the bytes of every object of a transaction, in
// the order they were stored.
func (s *Store) TransactionObjects(ctx context.Context, transactionID string) ([][]byte, error) {
	return all(ctx, s, scanBytes, `SELECT body FROM objects WHERE tseq = `+txnSeq+` ORDER BY rowid`, transactionID)
}

// ObjectsOfType returns the bytes of every object of one type, in storage
// order. Key and revocation records, the only objects read by type across
// transactions, are found by their index (migration 13); any other type
// reads the whole table (tests do), so read those by transaction instead.
func (s *Store) ObjectsOfType(ctx context.Context, objectType string) ([][]byte, error) {
	q, args := objectsOfType(objectType, "body")
	return list(ctx, s, scanBytes, q, args...)
}

// objectsOfType is the query for every object of one type. The index of
// key and revocation records is partial, and SQLite uses a partial index
// only where the query's own terms imply its condition, which a bound
// parameter does not: for those two types the type is written into the
// query as a literal.
func objectsOfType(objectType, columns string) (string, []any) {
	switch objectType {
	case "key_record", "revocation_record":
		return `SELECT ` + columns + ` FROM objects INDEXED BY key_objects WHERE object_type = '` + objectType + `' ORDER BY rowid`, nil
	}
	if lit, ok := typeLiteral(objectType); ok { // work.go says why
		return `SELECT ` + columns + ` FROM objects WHERE object_type = ` + lit + ` ORDER BY rowid`, nil
	}
	return `SELECT ` + columns + ` FROM objects WHERE object_type = ? ORDER BY rowid`, []any{objectType}
}

// KeyObjectsVersion returns a number that changes whenever a key_record
// or a revocation_record is stored, changed (a signature added) or
// removed, and whenever a mandate is stored, its status changed or
// removed, in the same commit, whichever process wrote it (migration 11's
// and 14's triggers). What was read of those objects under one number is still
// what the store holds while it is unchanged; read the number before the
// objects, so that a write between the two is seen at the next call.
//
// Under a context from WithKeyVersionMemo the number is read once and
// then held; a write this Store commits under that context holds the
// number as the commit left it.
func (s *Store) KeyObjectsVersion(ctx context.Context) (int64, error) {
	m := keyVersionMemoOf(ctx)
	if m != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		if n, ok := m.held[s.database]; ok {
			return n, nil
		}
	}
	var n int64
	if err := s.queryRow(ctx, keyVersionQuery).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: key objects version: %w", err)
	}
	if m != nil {
		m.held[s.database] = n
	}
	return n, nil
}

// WithKeyVersionMemo returns a context for one operation (an act, a
// received message) under which KeyObjectsVersion reads the database once
// and holds the number until this Store commits a write under the same
// context, which may have stored a key record; that commit's transaction
// reads the number as it leaves it, on the writer connection, and the
// memo holds that one (group.go). An operation resolves keys several
// times between two of its commits (51 reads of the number a formation,
// both sides, before the memo); with it, it sees the key records as they
// stood at its first resolution, or its last commit, as if a key record
// another process stores meanwhile had come a moment later. Not for a
// context that outlives one operation: a background loop's would hold
// the number for good.
//
// The memo holds one number for each Store: a context may reach two
// (two instances in one process, as tests run them, the one's act
// calling the other's receipt), and one database's number says nothing
// of the other's.
func WithKeyVersionMemo(ctx context.Context) context.Context {
	if keyVersionMemoOf(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, keyVersionMemoKey{}, &keyVersionMemo{held: map[*database]int64{}})
}

type keyVersionMemoKey struct{}

type keyVersionMemo struct {
	mu   sync.Mutex
	held map[*database]int64
}

// keyVersionQuery reads the key records' number.
const keyVersionQuery = `SELECT n FROM key_objects_version WHERE id = 1`

// keyVersionMemoOf returns the memo ctx carries, or nil.
func keyVersionMemoOf(ctx context.Context) *keyVersionMemo {
	m, _ := ctx.Value(keyVersionMemoKey{}).(*keyVersionMemo)
	return m
}

// holdKeyVersion makes n, read inside the write transaction s just
// committed under ctx, the number its memo holds for s: what a read right
// after the commit would have found, unless another process wrote between
// the two, which the memo treats as having come a moment later.
func (s *Store) holdKeyVersion(ctx context.Context, n int64) {
	if m := keyVersionMemoOf(ctx); m != nil {
		m.mu.Lock()
		m.held[s.database] = n
		m.mu.Unlock()
	}
}

// forgetKeyVersion drops the number held for s under ctx: called after
// every write s commits under it (or fails to).
func (s *Store) forgetKeyVersion(ctx context.Context) {
	if m := keyVersionMemoOf(ctx); m != nil {
		m.mu.Lock()
		delete(m.held, s.database)
		m.mu.Unlock()
	}
}

// KeyObjectsCache keeps a value derived from the key and revocation
// records under the KeyObjectsVersion read before it was derived, so that
// a reader of those records (at every key resolution, several times an
// act) reads them again only once one was stored, changed or removed, by
// any process. The zero value is empty and ready; the value is shared
// between callers, who only read it.
type KeyObjectsCache[T any] struct {
	mu      sync.Mutex
	version int64
	held    bool
	val     T
}

// Get returns the value derived under the store's current version,
// deriving it with read when the version moved since the value was kept.
func (c *KeyObjectsCache[T]) Get(ctx context.Context, s *Store, read func(context.Context) (T, error)) (T, error) {
	var zero T
	v, err := s.KeyObjectsVersion(ctx)
	if err != nil {
		return zero, err
	}
	c.mu.Lock()
	val, ok := c.val, c.held && c.version == v
	c.mu.Unlock()
	if ok {
		return val, nil
	}
	if val, err = read(ctx); err != nil {
		return zero, err
	}
	c.mu.Lock()
	c.val, c.version, c.held = val, v, true
	c.mu.Unlock()
	return val, nil
}

// StoredObject is an object's bytes with the origin it was stored under
// ("local", or the organisation it came from).
type StoredObject struct {
	Body   []byte
	Origin string
}

// ObjectsWithOrigin returns every object of a type with its origin, in
// the order they were stored.
func (s *Store) ObjectsWithOrigin(ctx context.Context, objectType string) ([]StoredObject, error) {
	q, args := objectsOfType(objectType, "body, origin")
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row rowScanner) (StoredObject, error) {
		var o StoredObject
		err := row.Scan(&o.Body, &o.Origin)
		return o, err
	})
}
