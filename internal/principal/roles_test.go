package principal_test

// The tests of "Roles in the types" (package documentation): the agent's
// side can neither import, nor hold, nor in a running serve process reach
// the principal's key.

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"encoding/hex"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/status"
)

const module = "github.com/partyd/party"

// agentSide are the packages the agent's tools, the record engine and the
// peer listener are made of.
var agentSide = []string{
	"internal/org", "internal/instance", "internal/agent", "internal/record",
	"internal/delivery", "internal/peering", "internal/status", "internal/store",
	"internal/authority", "internal/grade", "bindings/mcp", "bindings/mcp/bridge", "bindings/a2a", "bindings/https",
}

// principalSide are the packages that hold or hand out the principal's
// key or surface, and the composition roots that wire it to the admin
// listener.
var principalSide = []string{"internal/principal", "internal/admin", "internal/daemon", "internal/cli"}

// TestAgentSideImportsNoPrincipal: no package of the agent's side imports,
// directly or through any other package of this module, a package that
// can load the principal key or holds the principal's surface; and none
// of them but package instance (whose Init writes the file) names the
// principal key file.
func TestAgentSideImportsNoPrincipal(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{}
	for _, p := range principalSide {
		forbidden[module+"/"+p] = true
	}
	pkgs := map[string]*build.Package{}
	load := func(path string) *build.Package {
		if p, ok := pkgs[path]; ok {
			return p
		}
		p, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(path, module+"/")), 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		pkgs[path] = p
		return p
	}
	// via returns the chain of imports by which from reaches a forbidden
	// package, or nil.
	var via func(from string, seen map[string]bool) []string
	via = func(from string, seen map[string]bool) []string {
		if seen[from] {
			return nil
		}
		seen[from] = true
		for _, imp := range load(from).Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if forbidden[imp] {
				return []string{imp}
			}
			if chain := via(imp, seen); chain != nil {
				return append([]string{imp}, chain...)
			}
		}
		return nil
	}
	for _, rel := range agentSide {
		path := module + "/" + rel
		if chain := via(path, map[string]bool{}); chain != nil {
			t.Errorf("%s reaches %s", rel, strings.Join(chain, " → "))
		}
		if rel == "internal/instance" {
			continue
		}
		p := load(path)
		fset := token.NewFileSet()
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "PrincipalKeyFile" {
					t.Errorf("%s names the principal key file at %s", rel, fset.Position(sel.Pos()))
				}
				return true
			})
		}
	}
	// The check can fail: the principal's side does reach them.
	if via(module+"/internal/daemon", map[string]bool{}) == nil {
		t.Fatal("internal/daemon reaches no principal package: the walk is broken")
	}
}

// principalTypes are the types whose values are the principal's signing
// capability.
var principalTypes = []reflect.Type{reflect.TypeFor[principal.Key](), reflect.TypeFor[principal.Surface]()}

// typePath returns a path of fields, elements and signatures by which t
// can hold or produce a value of one of principalTypes, or "".
func typePath(t reflect.Type, seen map[reflect.Type]bool) string {
	for _, p := range principalTypes {
		if t == p {
			return t.String()
		}
	}
	if seen[t] {
		return ""
	}
	seen[t] = true
	in := func(what string, u reflect.Type) string {
		if p := typePath(u, seen); p != "" {
			return what + " " + p
		}
		return ""
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
		return in(t.Kind().String()+" of", t.Elem())
	case reflect.Map:
		if p := in("map key", t.Key()); p != "" {
			return p
		}
		return in("map of", t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if p := in(t.String()+"."+f.Name+":", f.Type); p != "" {
				return p
			}
		}
	case reflect.Func:
		for i := range t.NumIn() {
			if p := in("func taking", t.In(i)); p != "" {
				return p
			}
		}
		for i := range t.NumOut() {
			if p := in("func returning", t.Out(i)); p != "" {
				return p
			}
		}
	case reflect.Interface:
		for i := range t.NumMethod() {
			m := t.Method(i)
			if p := in(t.String()+"."+m.Name+":", m.Type); p != "" {
				return p
			}
		}
	}
	// Methods of named types, exported ones (what callers can reach).
	if t.Kind() != reflect.Interface {
		for _, u := range []reflect.Type{t, reflect.PointerTo(t)} {
			for i := range u.NumMethod() {
				m := u.Method(i)
				if p := in(u.String()+"."+m.Name+"():", m.Type); p != "" {
					return p
				}
			}
		}
	}
	return ""
}

// TestAgentRuntimeTypesHoldNoPrincipalKey walks the agent runtime's types
// — every field, exported or not, every element, every method signature,
// down through the standard library — and finds no way to hold or obtain
// a principal.Key or principal.Surface. Interface and function values can
// hold anything at run time; what a running serve puts in them is
// TestServeKeepsThePrincipalKeyFromTheAgent's concern.
func TestAgentRuntimeTypesHoldNoPrincipalKey(t *testing.T) {
	for _, root := range []reflect.Type{
		reflect.TypeFor[org.Org](), reflect.TypeFor[instance.Instance](), reflect.TypeFor[agent.Surface](),
		reflect.TypeFor[record.Engine](), reflect.TypeFor[daemon.Daemon](), reflect.TypeFor[mcp.Tool](),
		reflect.TypeFor[delivery.Inbox](), reflect.TypeFor[delivery.Outbox](), reflect.TypeFor[peering.Clients](),
		reflect.TypeFor[peering.TrustedKeys](), reflect.TypeFor[status.Client](), reflect.TypeFor[authority.Evaluator](),
	} {
		if p := typePath(root, map[reflect.Type]bool{}); p != "" {
			t.Errorf("%s reaches the principal's key: %s", root, p)
		}
	}
	// The walk can fail: it finds a field holding the surface, and a
	// function handing out the key.
	if p := typePath(reflect.TypeFor[holdsSurface](), map[reflect.Type]bool{}); p == "" {
		t.Fatal("the walk misses a *principal.Surface field")
	}
	if p := typePath(reflect.TypeFor[producesKey](), map[reflect.Type]bool{}); p == "" {
		t.Fatal("the walk misses a function returning a *principal.Key")
	}
}

// holdsSurface and producesKey are what the type walk must find; their
// fields are only ever reached by reflection.
type (
	holdsSurface struct {
		p *principal.Surface //lint:ignore U1000 read by the reflective type walk
	}
	producesKey struct {
		f func() (*principal.Key, error) //lint:ignore U1000 read by the reflective type walk
	}
)

var ecdsaKeyType = reflect.TypeFor[*ecdsa.PrivateKey]()

// privateKeys returns every *ecdsa.PrivateKey reachable from v through
// fields (exported or not), pointers, interfaces, slices, arrays and maps.
// It descends into this module's types, unnamed composites and the values
// interfaces hold, not into other packages' structs (a database handle, an
// HTTP mux, a mutex), whose state their own goroutines change while the
// walk reads; and it cannot look inside function values.
func privateKeys(v reflect.Value) []*ecdsa.PrivateKey {
	var out []*ecdsa.PrivateKey
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if !v.IsValid() {
			return
		}
		if v.Type() == ecdsaKeyType {
			if !v.IsNil() {
				out = append(out, (*ecdsa.PrivateKey)(unsafe.Pointer(v.Pointer())))
			}
			return
		}
		t := v.Type()
		if foreign(t) && t.Kind() != reflect.Interface {
			return
		}
		switch v.Kind() {
		case reflect.Interface:
			walk(v.Elem())
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			if foreign(t.Elem()) {
				return
			}
			walk(v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			if k := t.Elem().Kind(); k <= reflect.Complex128 || k == reflect.String {
				return
			}
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				walk(it.Key())
				walk(it.Value())
			}
		}
	}
	walk(v)
	return out
}

// foreign reports whether t is a named type of another module or of the
// standard library. The walk looks into the value an interface of such a
// type holds, never into such a struct.
func foreign(t reflect.Type) bool {
	return t.Name() != "" && t.PkgPath() != "" && !strings.HasPrefix(t.PkgPath(), module)
}

func holds(found []*ecdsa.PrivateKey, pub crypto.PublicKey) bool {
	for _, k := range found {
		if k.PublicKey.Equal(pub) {
			return true
		}
	}
	return false
}

// TestServeKeepsThePrincipalKeyFromTheAgent runs the serve process (the
// daemon with the record engine), which loads the principal's key for its
// admin listener, and walks the values it hands the agent's side: the
// Daemon every Mounter receives, with its Org, agent surface, record
// engine and tools. The agent's key is among the private keys reachable
// from them; the principal's is not. The same walk over the principal's
// surface finds the principal's key, so the walk can fail.
func TestServeKeepsThePrincipalKeyFromTheAgent(t *testing.T) {
	n := orgtest.New(t, "org_roles", nil, false)
	principalKey, err := keys.ReadPrivateFile(filepath.Join(n.Dir, instance.PrincipalKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	agentKey, err := keys.ReadPrivateFile(filepath.Join(n.Dir, instance.AgentKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if found := privateKeys(reflect.ValueOf(n.Principal(t))); !holds(found, principalKey.Public()) {
		t.Fatalf("the walk finds %d keys in the principal's surface, not the principal's", len(found))
	}
	// With a second agent (party agent add), each agent's own key is on
	// the agent's side, and still never the principal's.
	added, err := n.Principal(t).AddAgent(context.Background(), "agt_roles_two")
	if err != nil {
		t.Fatal(err)
	}
	secondKey, err := keys.ReadPrivateFile(filepath.Join(n.Dir, filepath.FromSlash(added.KeyFile)))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var found []*ecdsa.PrivateKey
	var engine bool
	walked := make(chan struct{})
	inspect := func(_ context.Context, d *daemon.Daemon) error {
		engine = d.Engine != nil
		found = privateKeys(reflect.ValueOf(d))
		close(walked)
		return nil
	}
	errc := make(chan error, 1)
	go func() {
		errc <- daemon.Run(ctx, n.Dir, daemon.Options{
			Logger:    slog.New(slog.DiscardHandler),
			Mount:     []daemon.Mounter{daemon.Record(daemon.PeerOptions{}), inspect},
			Listeners: daemon.Listeners{MCP: n.Sockets.MCP, Peer: n.Sockets.Peer, Admin: n.Sockets.Admin},
			Ready:     func(daemon.Addrs) { cancel() },
		})
	}()
	select {
	case <-walked:
	case err := <-errc:
		t.Fatalf("serve ended before its mounters ran: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if !engine {
		t.Fatal("the record engine was not mounted before the walk")
	}
	if !holds(found, agentKey.Public()) || !holds(found, secondKey.Public()) {
		t.Fatalf("the agents' keys are not among the %d private keys reachable from the daemon: the walk is broken", len(found))
	}
	if holds(found, principalKey.Public()) {
		t.Fatal("the principal's private key is reachable from the values serve hands the agent's side")
	}
}

// TestNewRefusesAnotherKey: the surface signs only with this
// organisation's principal key. Another instance's key, and a key file
// replaced under this instance's key id, are refused before anything is
// signed; the key prints as its id only.
func TestNewRefusesAnotherKey(t *testing.T) {
	a := orgtest.New(t, "org_alpha", nil, false)
	b := orgtest.New(t, "org_bravo", nil, false)
	kb, err := principal.LoadKey(b.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := principal.New(a.Org, kb); !errors.Is(err, principal.ErrWrongKey) {
		t.Fatalf("another organisation's key: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(b.Dir, instance.PrincipalKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.Dir, instance.PrincipalKeyFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	swapped, err := principal.LoadKey(a.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if swapped.KeyID() != a.Org.Config().PrincipalKeyID {
		t.Fatalf("key id %s", swapped.KeyID())
	}
	if _, err := principal.Open(a.Org); !errors.Is(err, principal.ErrWrongKey) {
		t.Fatalf("a replaced key file: %v", err)
	}
	if _, err := principal.New(a.Org, nil); err == nil {
		t.Fatal("a surface without a key")
	}

	k, err := principal.LoadKey(b.Dir)
	if err != nil {
		t.Fatal(err)
	}
	d := scalarHex(t, principalKey(t, b.Dir))
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("key", "key", k)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%+v", k), fmt.Sprintf("%#v", k), logged.String()} {
		if !strings.Contains(s, k.KeyID()) || strings.Contains(s, d) {
			t.Errorf("the key prints as %q", s)
		}
	}
}

// scalarHex is the private scalar in hex, as a leak would show it.
func scalarHex(t *testing.T, k *ecdsa.PrivateKey) string {
	t.Helper()
	b, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func principalKey(t *testing.T, dir string) *ecdsa.PrivateKey {
	t.Helper()
	k, err := keys.ReadPrivateFile(filepath.Join(dir, instance.PrincipalKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return k.(*ecdsa.PrivateKey)
}
