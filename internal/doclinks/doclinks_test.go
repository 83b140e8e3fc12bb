package doclinks

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/partyd/party"

// pkg is one package of the module, its documentation read from source.
type pkg struct {
	dir string
	doc *doc.Package
}

// load reads every package below the module's cmd, internal, bindings and
// examples, without its tests.
func load(t *testing.T) map[string]*pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]*pkg{}
	for _, top := range []string{"cmd", "internal", "bindings", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			fset := token.NewFileSet()
			var files []*ast.File
			entries, err := os.ReadDir(path)
			if err != nil {
				return err
			}
			for _, e := range entries {
				n := e.Name()
				if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
					continue
				}
				f, err := parser.ParseFile(fset, filepath.Join(path, n), nil, parser.ParseComments)
				if err != nil {
					return err
				}
				files = append(files, f)
			}
			if len(files) == 0 {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			ip := module + "/" + filepath.ToSlash(rel)
			p, err := doc.NewFromFiles(fset, files, ip, doc.AllDecls)
			if err != nil {
				return err
			}
			pkgs[ip] = &pkg{dir: rel, doc: p}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return pkgs
}

// has reports whether p declares name (an identifier, or Type.Member).
func has(p *doc.Package, name string) bool {
	typ, member, dotted := strings.Cut(name, ".")
	for _, v := range append(append([]*doc.Value{}, p.Consts...), p.Vars...) {
		if !dotted && slices.Contains(v.Names, name) {
			return true
		}
	}
	for _, f := range p.Funcs {
		if !dotted && f.Name == name {
			return true
		}
	}
	for _, ty := range p.Types {
		if ty.Name != typ {
			for _, f := range ty.Funcs { // constructors
				if !dotted && f.Name == name {
					return true
				}
			}
			for _, v := range append(append([]*doc.Value{}, ty.Consts...), ty.Vars...) {
				if !dotted && slices.Contains(v.Names, name) {
					return true
				}
			}
			continue
		}
		if !dotted {
			return true
		}
		for _, m := range ty.Methods {
			if m.Name == member {
				return true
			}
		}
		if st, ok := ty.Decl.Specs[0].(*ast.TypeSpec); ok {
			switch tt := st.Type.(type) {
			case *ast.StructType:
				for _, f := range tt.Fields.List {
					for _, n := range f.Names {
						if n.Name == member {
							return true
						}
					}
				}
			case *ast.InterfaceType:
				for _, f := range tt.Methods.List {
					for _, n := range f.Names {
						if n.Name == member {
							return true
						}
					}
				}
			}
		}
	}
	return false
}

// unlinked is a bracketed identifier left as plain text: the parser found
// nothing it names.
// An index (m[k]) is not one: the bracket follows a name or a closing
// bracket. A predeclared name ([string]) links to package builtin.
var unlinked = regexp.MustCompile(`(?:^|[^\w\])])\[(\*?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\]`)

var predeclared = map[string]bool{"any": true, "bool": true, "byte": true, "error": true, "int": true, "int64": true, "uint64": true, "string": true, "rune": true, "float64": true, "nil": true, "true": true, "false": true}

// TestDocLinksResolve reads every doc comment of the module's packages
// (package, constants, variables, types, functions, methods) and fails on a
// link to the module that names nothing, or a bracketed name that is no
// link because nothing has it.
func TestDocLinksResolve(t *testing.T) {
	pkgs := load(t)
	if len(pkgs) < 30 {
		t.Fatalf("read %d packages; the module has more", len(pkgs))
	}
	var bad []string
	links := 0
	for ip, p := range pkgs {
		parser := p.doc.Parser()
		check := func(where, text string) {
			if text == "" {
				return
			}
			var walk func(ts []comment.Text)
			walk = func(ts []comment.Text) {
				for _, x := range ts {
					switch x := x.(type) {
					case *comment.DocLink:
						links++
						target := x.ImportPath
						if target == "" {
							target = ip
						}
						name := x.Name
						if x.Recv != "" {
							name = x.Recv + "." + x.Name
						}
						if !strings.HasPrefix(target, module+"/") || name == "" {
							continue
						}
						q, ok := pkgs[target]
						if !ok || !has(q.doc, name) {
							bad = append(bad, p.dir+": "+where+": ["+target+"."+name+"] names nothing")
						}
					case comment.Plain:
						for _, m := range unlinked.FindAllStringSubmatch(string(x), -1) {
							if !predeclared[m[1]] {
								bad = append(bad, p.dir+": "+where+": ["+m[1]+"] is no link: nothing has that name")
							}
						}
					case *comment.Link:
						walk(x.Text)
					}
				}
			}
			for _, b := range parser.Parse(text).Content {
				switch b := b.(type) {
				case *comment.Paragraph:
					walk(b.Text)
				case *comment.Heading:
					walk(b.Text)
				case *comment.List:
					for _, it := range b.Items {
						for _, c := range it.Content {
							if para, ok := c.(*comment.Paragraph); ok {
								walk(para.Text)
							}
						}
					}
				}
			}
		}
		check("package doc", p.doc.Doc)
		values := func(vs []*doc.Value) {
			for _, v := range vs {
				check(strings.Join(v.Names, ","), v.Doc)
			}
		}
		values(p.doc.Consts)
		values(p.doc.Vars)
		for _, f := range p.doc.Funcs {
			check(f.Name, f.Doc)
		}
		for _, ty := range p.doc.Types {
			check(ty.Name, ty.Doc)
			values(ty.Consts)
			values(ty.Vars)
			for _, f := range ty.Funcs {
				check(f.Name, f.Doc)
			}
			for _, m := range ty.Methods {
				check(ty.Name+"."+m.Name, m.Doc)
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
	if links == 0 {
		t.Fatal("no doc link read: the test reads nothing")
	}
	t.Logf("%d doc links in %d packages", links, len(pkgs))
}
