// Package deploytest checks the project's container deployment without a
// container engine: it reads docker-compose.yml as the JSON-compatible
// value the Compose Specification's schema validates, and Check judges that
// value against the deployment's security invariants:
//
//   - key isolation: a volume mounted at /data by a service of one
//     organisation holds that organisation's keys; no service of another
//     organisation, and no service acting for no organisation (the scripted
//     agents), mounts it anywhere. A service acting for no organisation
//     mounts nothing writable.
//   - loopback only: every published port is bound to a loopback address,
//     except the peer port (HTTPS with pinned mutual TLS), and no service
//     shares the host's network.
//   - the peers volume (mounted at /peers) is mounted nowhere else, never
//     at /data.
//   - every long-running service has a health check; a service is one-shot
//     only if it says restart: "no".
//
// A service's organisation is its org.partyd.organization label, and its
// name must start with the organisation's short name (northstar for
// org_northstar), the name the other instance reaches it by. Compose
// features the checker does not model (extends, include, volumes_from a
// container, interpolation in mounts and ports) are reported rather than
// passed over, so a file the checker cannot see through fails.
package deploytest

import (
	"encoding/json"
	"fmt"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	yaml "go.yaml.in/yaml/v3"
)

// Rules name the invariants a Problem breaks.
const (
	RuleKeyIsolation = "key-isolation"
	RuleLoopback     = "loopback-ports"
	RulePeersVolume  = "peers-volume"
	RuleHealthcheck  = "healthcheck"
	RuleOrganization = "organization"
	RuleDependency   = "dependency"
	RuleUnsupported  = "unsupported"
)

// Policy holds the deployment's conventions.
type Policy struct {
	// DataPath is where an organisation's state directory is mounted.
	DataPath string
	// PeersPath is where the volume of peer files is mounted.
	PeersPath string
	// PeerPort is the container port of the peer listener, the only one
	// that may be published on a non-loopback address.
	PeerPort int
	// OrgLabel is the service label naming the organisation it acts for.
	OrgLabel string
}

// DefaultPolicy is docker-compose.yml's.
var DefaultPolicy = Policy{DataPath: "/data", PeersPath: "/peers", PeerPort: 7402, OrgLabel: "org.partyd.organization"}

// Problem is one broken invariant.
type Problem struct {
	Rule    string
	Service string
	Detail  string
}

func (p Problem) String() string {
	if p.Service == "" {
		return p.Rule + ": " + p.Detail
	}
	return p.Rule + ": service " + p.Service + ": " + p.Detail
}

// Report is what Check found: the problems, and what it saw, so that a
// test can tell a clean file from one the checker saw nothing in.
type Report struct {
	Problems []Problem
	// Organizations maps each organisation to its services.
	Organizations map[string][]string
	// KeyVolumes maps each key volume (by its effective name, or bind:PATH)
	// to the organisation it belongs to.
	KeyVolumes map[string]string
	// PeersVolumes are the volumes mounted at PeersPath.
	PeersVolumes []string
	// Unaffiliated are the services acting for no organisation.
	Unaffiliated []string
	// LongRunning are the services that need a health check.
	LongRunning []string
	// Published lists every published port as service: host_ip -> target.
	Published []string
}

// Has reports whether the report holds a problem under rule.
func (r Report) Has(rule string) bool {
	for _, p := range r.Problems {
		if p.Rule == rule {
			return true
		}
	}
	return false
}

// ParseYAML decodes a compose file into the JSON-compatible value the
// schema validates: objects are map[string]any, numbers json.Number.
// Anchors, aliases and merge keys are resolved as Compose resolves them.
func ParseYAML(data []byte) (any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("compose: not representable as JSON: %w", err)
	}
	return jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
}

// mount is one filesystem mount of a service.
type mount struct {
	kind     string // volume, bind, anonymous, tmpfs, or another long-syntax type
	id       string // volume:NAME or bind:PATH; empty for anonymous and tmpfs
	target   string
	readOnly bool
	from     string // the service it was inherited from by volumes_from
}

func (m mount) String() string {
	s := m.id
	if s == "" {
		s = m.kind
	}
	s += " at " + m.target
	if m.from != "" {
		s += " (volumes_from " + m.from + ")"
	}
	return s
}

// overlaps reports whether two mount sources can show the same files.
func overlaps(a, b string) bool {
	if a == b {
		return true
	}
	if !strings.HasPrefix(a, "bind:") || !strings.HasPrefix(b, "bind:") {
		return false
	}
	a, b = a[len("bind:"):], b[len("bind:"):]
	return strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/") || strings.HasPrefix(b, strings.TrimSuffix(a, "/")+"/")
}

type checker struct {
	pol      Policy
	doc      map[string]any
	services map[string]map[string]any
	names    []string
	volumes  map[string]any // top-level volumes
	project  string
	rep      Report
}

func (c *checker) problem(rule, service, format string, args ...any) {
	c.rep.Problems = append(c.rep.Problems, Problem{Rule: rule, Service: service, Detail: fmt.Sprintf(format, args...)})
}

// Check judges a parsed compose file (ParseYAML's value) against pol.
func Check(v any, pol Policy) Report {
	c := &checker{pol: pol, rep: Report{Organizations: map[string][]string{}, KeyVolumes: map[string]string{}}}
	doc, ok := v.(map[string]any)
	if !ok {
		c.problem(RuleUnsupported, "", "the file is not a mapping")
		return c.rep
	}
	c.doc = doc
	c.project, _ = doc["name"].(string)
	if c.project == "" {
		c.project = "<project>"
	}
	c.volumes, _ = doc["volumes"].(map[string]any)
	if _, ok := doc["include"]; ok {
		c.problem(RuleUnsupported, "", "include is not modelled: its services would go unchecked")
	}
	svcs, _ := doc["services"].(map[string]any)
	c.services = map[string]map[string]any{}
	for name, s := range svcs {
		m, _ := s.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		c.services[name] = m
		c.names = append(c.names, name)
	}
	sort.Strings(c.names)
	if len(c.names) == 0 {
		c.problem(RuleUnsupported, "", "no services")
	}

	orgs := map[string]string{}
	mounts := map[string][]mount{}
	for _, name := range c.names {
		s := c.services[name]
		if _, ok := s["extends"]; ok {
			c.problem(RuleUnsupported, name, "extends is not modelled: its inherited mounts and ports would go unchecked")
		}
		orgs[name] = c.organization(name, s)
		mounts[name] = c.mounts(name, s, map[string]bool{})
	}
	c.keyIsolation(orgs, mounts)
	c.peers(mounts)
	for _, name := range c.names {
		c.ports(name, c.services[name])
	}
	c.health()
	return c.rep
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// organization returns the organisation a service acts for ("" for none)
// and checks that its name matches it.
func (c *checker) organization(name string, s map[string]any) string {
	var org string
	switch l := s["labels"].(type) {
	case map[string]any:
		if v, ok := l[c.pol.OrgLabel]; ok {
			org = fmt.Sprint(v)
		}
	case []any:
		for _, e := range l {
			k, v, _ := strings.Cut(fmt.Sprint(e), "=")
			if k == c.pol.OrgLabel {
				org = v
			}
		}
	}
	if org == "" {
		c.rep.Unaffiliated = append(c.rep.Unaffiliated, name)
		return ""
	}
	short, ok := strings.CutPrefix(org, "org_")
	if !ok || short == "" || strings.Contains(org, "$") {
		c.problem(RuleOrganization, name, "label %s=%q is not an organisation id (org_...)", c.pol.OrgLabel, org)
		return org
	}
	if name != short && !strings.HasPrefix(name, short+"-") {
		c.problem(RuleOrganization, name, "acts for %s but is not named %s or %s-...", org, short, short)
	}
	c.rep.Organizations[org] = append(c.rep.Organizations[org], name)
	return org
}

// mounts returns a service's mounts, with those it inherits by
// volumes_from.
func (c *checker) mounts(name string, s map[string]any, seen map[string]bool) []mount {
	if seen[name] {
		c.problem(RuleUnsupported, name, "volumes_from cycle")
		return nil
	}
	seen[name] = true
	var out []mount
	list, _ := s["volumes"].([]any)
	for _, e := range list {
		m, err := c.mount(e)
		if err != nil {
			c.problem(RuleUnsupported, name, "volume %v: %v", e, err)
			continue
		}
		out = append(out, m)
	}
	from, _ := s["volumes_from"].([]any)
	for _, e := range from {
		ref := fmt.Sprint(e)
		src, mode, _ := strings.Cut(ref, ":")
		if src == "container" {
			c.problem(RuleUnsupported, name, "volumes_from %s is not modelled: that container's mounts would go unchecked", ref)
			continue
		}
		other, ok := c.services[src]
		if !ok {
			c.problem(RuleUnsupported, name, "volumes_from names no service: %s", ref)
			continue
		}
		for _, m := range c.mounts(src, other, seen) {
			if mode == "ro" {
				m.readOnly = true
			}
			if m.from == "" {
				m.from = src
			}
			out = append(out, m)
		}
	}
	return out
}

func (c *checker) volumeID(key string) (string, error) {
	spec, ok := c.volumes[key]
	if !ok {
		return "", fmt.Errorf("named volume %q is not declared under the top-level volumes", key)
	}
	if m, _ := spec.(map[string]any); m != nil {
		if n, ok := m["name"].(string); ok && n != "" {
			return "volume:" + n, nil
		}
	}
	return "volume:" + c.project + "_" + key, nil
}

func (c *checker) mount(e any) (mount, error) {
	switch v := e.(type) {
	case string:
		if strings.Contains(v, "$") {
			return mount{}, fmt.Errorf("interpolation is not modelled")
		}
		parts := strings.Split(v, ":")
		var m mount
		switch len(parts) {
		case 1:
			return mount{kind: "anonymous", target: path.Clean(parts[0])}, nil
		case 2, 3:
			m.target = path.Clean(parts[1])
			if len(parts) == 3 {
				for _, o := range strings.Split(parts[2], ",") {
					if o == "ro" {
						m.readOnly = true
					}
				}
			}
		default:
			return mount{}, fmt.Errorf("cannot read %q", v)
		}
		src := parts[0]
		if strings.HasPrefix(src, "/") || strings.HasPrefix(src, ".") || strings.HasPrefix(src, "~") {
			m.kind, m.id = "bind", "bind:"+path.Clean(src)
			return m, nil
		}
		id, err := c.volumeID(src)
		if err != nil {
			return mount{}, err
		}
		m.kind, m.id = "volume", id
		return m, nil
	case map[string]any:
		typ, _ := v["type"].(string)
		src, _ := v["source"].(string)
		tgt, _ := v["target"].(string)
		if strings.Contains(src+tgt, "$") {
			return mount{}, fmt.Errorf("interpolation is not modelled")
		}
		m := mount{kind: typ, target: path.Clean(tgt)}
		switch ro := v["read_only"].(type) {
		case bool:
			m.readOnly = ro
		case string:
			m.readOnly = ro == "true"
		}
		switch typ {
		case "volume":
			if src == "" {
				m.kind = "anonymous"
				return m, nil
			}
			id, err := c.volumeID(src)
			if err != nil {
				return mount{}, err
			}
			m.id = id
		case "bind":
			m.id = "bind:" + path.Clean(src)
		case "tmpfs":
		default:
			return mount{}, fmt.Errorf("mount type %q is not modelled", typ)
		}
		return m, nil
	}
	return mount{}, fmt.Errorf("neither short nor long syntax")
}

func (c *checker) keyIsolation(orgs map[string]string, mounts map[string][]mount) {
	// A volume or bind mounted at DataPath holds the keys of the
	// organisation whose services mount it there.
	users := map[string]map[string][]string{} // volume -> organisation -> services
	for _, name := range c.names {
		for _, m := range mounts[name] {
			if m.target != c.pol.DataPath || m.id == "" {
				continue
			}
			org := orgs[name]
			if org == "" {
				c.problem(RuleKeyIsolation, name, "mounts %s, an organisation's state, but acts for no organisation", m)
				continue
			}
			if users[m.id] == nil {
				users[m.id] = map[string][]string{}
			}
			users[m.id][org] = append(users[m.id][org], name)
		}
	}
	contested := map[string]bool{}
	for _, id := range sortedKeys(users) {
		if len(users[id]) == 1 {
			for org := range users[id] {
				c.rep.KeyVolumes[id] = org
			}
			continue
		}
		contested[id] = true
		var who []string
		for _, org := range sortedKeys(users[id]) {
			who = append(who, fmt.Sprintf("%s (%s)", org, strings.Join(users[id][org], ", ")))
		}
		c.problem(RuleKeyIsolation, "", "%s is mounted at %s as the state of more than one organisation: %s", id, c.pol.DataPath, strings.Join(who, ", "))
	}
	for _, name := range c.names {
		org := orgs[name]
		for _, m := range mounts[name] {
			if m.id == "" {
				continue
			}
			if org == "" && m.kind != "tmpfs" && !m.readOnly {
				c.problem(RuleKeyIsolation, name, "acts for no organisation but mounts %s writable", m)
			}
			if org == "" && m.target == c.pol.DataPath {
				continue // reported above
			}
			for _, key := range sortedKeys(c.rep.KeyVolumes) {
				owner := c.rep.KeyVolumes[key]
				if !overlaps(m.id, key) {
					continue
				}
				switch {
				case org == "":
					c.problem(RuleKeyIsolation, name, "acts for no organisation but mounts %s, which holds %s's keys", m, owner)
				case org != owner:
					c.problem(RuleKeyIsolation, name, "acts for %s but mounts %s, which holds %s's keys", org, m, owner)
				}
			}
			for key := range contested {
				if overlaps(m.id, key) && m.target != c.pol.DataPath {
					c.problem(RuleKeyIsolation, name, "mounts %s, which more than one organisation uses as its state", m)
				}
			}
		}
	}
}

func (c *checker) peers(mounts map[string][]mount) {
	peers := map[string]bool{}
	for _, name := range c.names {
		for _, m := range mounts[name] {
			if m.target == c.pol.PeersPath && m.id != "" {
				peers[m.id] = true
			}
		}
	}
	for _, id := range sortedKeys(peers) {
		c.rep.PeersVolumes = append(c.rep.PeersVolumes, id)
		if owner, ok := c.rep.KeyVolumes[id]; ok {
			c.problem(RulePeersVolume, "", "%s is mounted at %s and also holds %s's state", id, c.pol.PeersPath, owner)
		}
	}
	for _, name := range c.names {
		for _, m := range mounts[name] {
			for _, id := range c.rep.PeersVolumes {
				if !overlaps(m.id, id) || m.target == c.pol.PeersPath {
					continue
				}
				if m.target == c.pol.DataPath {
					c.problem(RulePeersVolume, name, "mounts the peers volume %s at %s", id, m.target)
				} else {
					c.problem(RulePeersVolume, name, "mounts the peers volume %s at %s; it belongs at %s only", id, m.target, c.pol.PeersPath)
				}
			}
		}
	}
}

// ports checks that every published port is bound to loopback, save the
// peer port.
func (c *checker) ports(name string, s map[string]any) {
	if nm, _ := s["network_mode"].(string); nm == "host" || strings.Contains(nm, "$") {
		c.problem(RuleLoopback, name, "network_mode %q puts every listener on the host's interfaces", nm)
	}
	list, _ := s["ports"].([]any)
	for _, e := range list {
		ip, lo, hi, err := parsePort(e)
		if err != nil {
			c.problem(RuleUnsupported, name, "port %v: %v", e, err)
			continue
		}
		shown := ip
		if shown == "" {
			shown = "all interfaces"
		}
		c.rep.Published = append(c.rep.Published, fmt.Sprintf("%s: %s -> %d-%d", name, shown, lo, hi))
		if lo == c.pol.PeerPort && hi == c.pol.PeerPort {
			continue
		}
		if p := net.ParseIP(ip); p == nil || !p.IsLoopback() {
			c.problem(RuleLoopback, name, "publishes container port %s on %s; publish it on 127.0.0.1 only", portRange(lo, hi), shown)
		}
	}
}

func portRange(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// parsePort reads one ports entry: the host address it is bound to ("" for
// all) and the container port range.
func parsePort(e any) (ip string, lo, hi int, err error) {
	var target string
	switch v := e.(type) {
	case json.Number:
		target = v.String()
	case float64:
		target = strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		if strings.Contains(v, "$") {
			return "", 0, 0, fmt.Errorf("interpolation is not modelled")
		}
		v, _, _ = strings.Cut(v, "/")
		if strings.HasPrefix(v, "[") {
			end := strings.Index(v, "]")
			if end < 0 || !strings.HasPrefix(v[end+1:], ":") {
				return "", 0, 0, fmt.Errorf("cannot read %q", v)
			}
			ip, v = v[1:end], v[end+2:]
			_, target, _ = strings.Cut(v, ":")
		} else {
			parts := strings.Split(v, ":")
			n := len(parts)
			target = parts[n-1]
			if n >= 3 {
				ip = strings.Join(parts[:n-2], ":")
			}
		}
	case map[string]any:
		if h, ok := v["host_ip"].(string); ok {
			ip = h
		}
		target = fmt.Sprint(v["target"])
		if strings.Contains(ip+target, "$") {
			return "", 0, 0, fmt.Errorf("interpolation is not modelled")
		}
	default:
		return "", 0, 0, fmt.Errorf("neither short nor long syntax")
	}
	a, b, isRange := strings.Cut(target, "-")
	if lo, err = strconv.Atoi(a); err != nil {
		return "", 0, 0, fmt.Errorf("container port %q", target)
	}
	hi = lo
	if isRange {
		if hi, err = strconv.Atoi(b); err != nil || hi < lo {
			return "", 0, 0, fmt.Errorf("container port range %q", target)
		}
	}
	return ip, lo, hi, nil
}

func oneShot(s map[string]any) bool {
	r, ok := s["restart"].(string)
	return ok && r == "no"
}

func hasHealthcheck(s map[string]any) bool {
	h, _ := s["healthcheck"].(map[string]any)
	if h == nil {
		return false
	}
	switch d := h["disable"].(type) {
	case bool:
		if d {
			return false
		}
	case string:
		if d == "true" {
			return false
		}
	}
	switch t := h["test"].(type) {
	case string:
		return t != "" && t != "NONE"
	case []any:
		return len(t) > 1 && fmt.Sprint(t[0]) != "NONE"
	}
	return false
}

// health checks that long-running services have health checks and that
// depends_on conditions ask of a service what it can give.
func (c *checker) health() {
	for _, name := range c.names {
		s := c.services[name]
		if !oneShot(s) {
			c.rep.LongRunning = append(c.rep.LongRunning, name)
			if !hasHealthcheck(s) {
				c.problem(RuleHealthcheck, name, "is long-running (restart is not \"no\") but has no health check")
			}
		}
		deps := map[string]string{}
		switch d := s["depends_on"].(type) {
		case []any:
			for _, e := range d {
				deps[fmt.Sprint(e)] = "service_started"
			}
		case map[string]any:
			for k, e := range d {
				m, _ := e.(map[string]any)
				cond, _ := m["condition"].(string)
				deps[k] = cond
			}
		}
		for _, dep := range sortedKeys(deps) {
			other, ok := c.services[dep]
			switch {
			case !ok:
				c.problem(RuleDependency, name, "depends on %s, which is not a service", dep)
			case deps[dep] == "service_healthy" && !hasHealthcheck(other):
				c.problem(RuleDependency, name, "waits for %s to be healthy, but it has no health check", dep)
			case deps[dep] == "service_completed_successfully" && !oneShot(other):
				c.problem(RuleDependency, name, "waits for %s to complete, but it is not one-shot (restart: \"no\")", dep)
			}
		}
	}
}
