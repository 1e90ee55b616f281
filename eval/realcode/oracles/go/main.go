// Command oracle-go prints the definitions and the certainly-resolved calls of a Go source tree
// as one JSON object (see eval/realcode/README.md), using only the standard library's parser.
//
// Usage: oracle-go ROOT
//
// Calls are resolved syntactically, with go/parser's per-file object resolution telling local
// names from package-level ones. A call is reported only when it names exactly one definition:
//   - f(...) where f is a function of the caller's own package;
//   - pkg.F(...) where pkg imports another package of the same module;
//   - x.M(...) where x's named type is known without type inference (receiver, parameter or
//     variable of a declared type, composite literal, conversion, type assertion, field of a
//     known struct, or result of a resolved function) and that type itself declares M.
//
// Anything else (interface dispatch, promoted methods, function values, build-tag variants that
// declare the same name twice) is left out rather than guessed.
package main

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// maxDepth bounds the chains of variables and fields followed to find a type.
const maxDepth = 16

type definition struct {
	Path      string  `json:"path"`
	Qualname  string  `json:"qualname"`
	Name      string  `json:"name"`
	Kind      string  `json:"kind"`
	Container *string `json:"container"`
	StartLine int     `json:"start_line"`
	EndLine   int     `json:"end_line"`
	Doc       string  `json:"doc"`
	Signature string  `json:"signature"`
	BodySHA   string  `json:"body_sha"`
	Test      bool    `json:"test"`

	file *file
	decl *ast.FuncDecl // set for functions and methods declared with func
}

func (d *definition) key() string { return d.Path + "::" + d.Qualname }

type call struct {
	Caller string `json:"caller"`
	Callee string `json:"callee"`
}

type output struct {
	Language    string        `json:"language"`
	Definitions []*definition `json:"definitions"`
	Calls       []call        `json:"calls"`
}

type module struct {
	dir  string // POSIX, relative to ROOT ("." for the root)
	path string
}

type file struct {
	rel     string
	dir     string
	src     []byte
	ast     *ast.File
	test    bool
	ignored bool // `//go:build ignore`: a separate program, not part of the package
	pkg     *pkg
	mod     *module
	imports map[string]string // local name -> directory of an imported package of the same module
}

// typeDecl is a package-level type declaration.
type typeDecl struct {
	spec *ast.TypeSpec
	file *file
}

type pkg struct {
	dir, name string
	funcs     map[string][]*definition // package-level functions by name
	methods   map[string][]*definition // methods by "Type.Method"
	types     map[string][]*typeDecl
}

type oracle struct {
	root     string
	fset     *token.FileSet
	files    []*file
	modules  map[string]*module // by directory
	pkgs     map[string]*pkg    // by dir + "\x00" + package name
	topTypes map[*ast.TypeSpec]*typeDecl
	defs     []*definition
	seen     map[string]bool // definition keys already listed (overloads share one key)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: oracle-go ROOT")
		os.Exit(2)
	}
	o := &oracle{
		root:     os.Args[1],
		fset:     token.NewFileSet(),
		modules:  map[string]*module{},
		pkgs:     map[string]*pkg{},
		topTypes: map[*ast.TypeSpec]*typeDecl{},
		seen:     map[string]bool{},
	}
	if err := o.load(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle-go:", err)
		os.Exit(1)
	}
	for _, f := range o.files {
		o.collectDefinitions(f)
	}
	for _, f := range o.files {
		o.resolveImports(f)
	}
	out := output{Language: "go", Definitions: o.defs, Calls: o.calls()}
	sort.Slice(out.Definitions, func(i, j int) bool {
		a, b := out.Definitions[i], out.Definitions[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.StartLine != b.StartLine {
			return a.StartLine < b.StartLine
		}
		return a.Qualname < b.Qualname
	})
	if out.Definitions == nil {
		out.Definitions = []*definition{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "oracle-go:", err)
		os.Exit(1)
	}
	os.Stdout.Write(buf.Bytes())
}

// --- loading ------------------------------------------------------------------------------------

func (o *oracle) load() error {
	var paths []string
	err := filepath.WalkDir(o.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(o.root, p)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (name == "vendor" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasPrefix(name, ".") {
			return nil
		}
		if name == "go.mod" {
			if mp := modulePath(p); mp != "" {
				o.modules[path.Dir(rel)] = &module{dir: path.Dir(rel), path: mp}
			}
		} else if strings.HasSuffix(name, ".go") {
			paths = append(paths, rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	for _, rel := range paths {
		src, err := os.ReadFile(filepath.Join(o.root, filepath.FromSlash(rel)))
		if err != nil {
			fmt.Fprintln(os.Stderr, "oracle-go: skipped", rel+":", err)
			continue
		}
		tree, err := parser.ParseFile(o.fset, rel, src, parser.ParseComments)
		if tree == nil {
			fmt.Fprintln(os.Stderr, "oracle-go: skipped", rel+":", err)
			continue
		}
		if err != nil {
			// A partial tree still has its definitions; say so, keep going.
			fmt.Fprintln(os.Stderr, "oracle-go: syntax errors in", rel+":", err)
		}
		f := &file{
			rel:     rel,
			dir:     path.Dir(rel),
			src:     src,
			ast:     tree,
			test:    strings.HasSuffix(rel, "_test.go"),
			ignored: ignoredByBuildTag(tree),
			mod:     o.moduleOf(path.Dir(rel)),
		}
		key := f.dir + "\x00" + tree.Name.Name
		p := o.pkgs[key]
		if p == nil {
			p = &pkg{dir: f.dir, name: tree.Name.Name, funcs: map[string][]*definition{},
				methods: map[string][]*definition{}, types: map[string][]*typeDecl{}}
			o.pkgs[key] = p
		}
		f.pkg = p
		o.files = append(o.files, f)
	}
	return nil
}

// modulePath reads the module directive of a go.mod file ("" when there is none).
func modulePath(goMod string) string {
	data, err := os.ReadFile(goMod)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" {
			if unq, err := strconv.Unquote(fields[1]); err == nil {
				return unq
			}
			return fields[1]
		}
	}
	return ""
}

// moduleOf is the innermost module whose directory holds dir.
func (o *oracle) moduleOf(dir string) *module {
	for {
		if m := o.modules[dir]; m != nil {
			return m
		}
		if dir == "." {
			return nil
		}
		dir = path.Dir(dir)
	}
}

func ignoredByBuildTag(f *ast.File) bool {
	for _, group := range f.Comments {
		if group.Pos() > f.Package {
			break
		}
		for _, c := range group.List {
			if !constraint.IsGoBuild(c.Text) && !constraint.IsPlusBuild(c.Text) {
				continue
			}
			if expr, err := constraint.Parse(c.Text); err == nil && expr.String() == "ignore" {
				return true
			}
		}
	}
	return false
}

// --- definitions ----------------------------------------------------------------------------------

func (o *oracle) line(pos token.Pos) int { return o.fset.Position(pos).Line }

func (o *oracle) text(f *file, from, to token.Pos) string {
	return string(f.src[o.fset.Position(from).Offset:o.fset.Position(to).Offset])
}

func (o *oracle) add(f *file, d *definition) {
	d.Path, d.file, d.Test = f.rel, f, f.test
	if o.seen[d.key()] {
		return
	}
	o.seen[d.key()] = true
	o.defs = append(o.defs, d)
}

func (o *oracle) newDef(f *file, qualname, name, kind string, from, to token.Pos, doc *ast.CommentGroup) *definition {
	sum := sha1.Sum([]byte(o.text(f, from, to)))
	return &definition{
		Qualname: qualname, Name: name, Kind: kind,
		StartLine: o.line(from), EndLine: o.line(to),
		Doc: firstParagraph(doc), BodySHA: hex.EncodeToString(sum[:]),
	}
}

func (o *oracle) collectDefinitions(f *file) {
	for _, decl := range f.ast.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			o.funcDef(f, d)
		case *ast.GenDecl:
			if d.Tok == token.TYPE {
				for _, spec := range d.Specs {
					ts := spec.(*ast.TypeSpec)
					td := &typeDecl{spec: ts, file: f}
					o.topTypes[ts] = td
					f.pkg.types[ts.Name.Name] = append(f.pkg.types[ts.Name.Name], td)
					o.typeDef(f, d, ts, "")
				}
			}
		}
	}
}

func (o *oracle) funcDef(f *file, d *ast.FuncDecl) {
	name := d.Name.Name
	qualname, kind := name, "function"
	var container *string
	if d.Recv != nil {
		recv := receiverType(d.Recv)
		if recv == "" {
			return
		}
		qualname, kind, container = recv+"."+name, "method", &recv
	}
	def := o.newDef(f, qualname, name, kind, d.Pos(), d.End(), d.Doc)
	def.Container, def.decl = container, d
	if d.Body != nil {
		def.Signature = strings.TrimSpace(o.text(f, d.Pos(), d.Body.Lbrace))
	} else {
		def.Signature = strings.TrimSpace(o.text(f, d.Pos(), d.End()))
	}
	o.add(f, def)
	if kind == "method" {
		key := *container + "." + name
		f.pkg.methods[key] = append(f.pkg.methods[key], def)
	} else {
		f.pkg.funcs[name] = append(f.pkg.funcs[name], def)
	}
	if d.Body == nil {
		return
	}
	// Types declared inside a function nest under it, as in graphmem's qualnames.
	ast.Inspect(d.Body, func(n ast.Node) bool {
		if ds, ok := n.(*ast.DeclStmt); ok {
			if gd, ok := ds.Decl.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
				for _, spec := range gd.Specs {
					o.typeDef(f, gd, spec.(*ast.TypeSpec), qualname+".")
				}
			}
		}
		return true
	})
}

func (o *oracle) typeDef(f *file, gd *ast.GenDecl, ts *ast.TypeSpec, prefix string) {
	name := ts.Name.Name
	qualname := prefix + name
	// A lone spec is the whole declaration (`type X struct{...}`); in a group, only its own lines.
	from, to, doc := ts.Pos(), ts.End(), ts.Doc
	if len(gd.Specs) == 1 {
		from, to = gd.Pos(), gd.End()
		if doc == nil {
			doc = gd.Doc
		}
	}
	def := o.newDef(f, qualname, name, "type", from, to, doc)
	head := o.text(f, ts.Name.Pos(), ts.End())
	switch t := ts.Type.(type) {
	case *ast.StructType:
		if !ts.Assign.IsValid() {
			def.Kind = "struct"
			head = o.text(f, ts.Name.Pos(), t.Struct) + "struct"
		}
	case *ast.InterfaceType:
		if !ts.Assign.IsValid() {
			def.Kind = "interface"
			head = o.text(f, ts.Name.Pos(), t.Interface) + "interface"
		}
	}
	if i := strings.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	// A type whose first line opens a literal (`type X []struct {`) ends its signature there.
	def.Signature = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace("type "+strings.TrimSpace(head)), "{"))
	o.add(f, def)
	iface, ok := ts.Type.(*ast.InterfaceType)
	if !ok || def.Kind != "interface" || iface.Methods == nil {
		return
	}
	// Methods an interface declares are definitions of their own (`Interface.Method`).
	for _, field := range iface.Methods.List {
		if _, isFunc := field.Type.(*ast.FuncType); !isFunc || len(field.Names) == 0 {
			continue
		}
		for _, n := range field.Names {
			m := o.newDef(f, qualname+"."+n.Name, n.Name, "method", field.Pos(), field.End(), field.Doc)
			m.Container = &qualname
			m.Signature = strings.TrimSpace(o.text(f, field.Pos(), field.End()))
			o.add(f, m)
		}
	}
}

// receiverType is the receiver's type name without pointer or type parameters.
func receiverType(recv *ast.FieldList) string {
	if len(recv.List) == 0 {
		return ""
	}
	expr := recv.List[0].Type
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.ParenExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

// firstParagraph is a doc comment's first paragraph on one line.
func firstParagraph(doc *ast.CommentGroup) string {
	if doc == nil {
		return ""
	}
	text := strings.TrimSpace(doc.Text())
	if i := strings.Index(text, "\n\n"); i >= 0 {
		text = text[:i]
	}
	return strings.Join(strings.Fields(text), " ")
}

// --- imports --------------------------------------------------------------------------------------

// importable is the package other directories import from dir (nil when that is not certain).
func (o *oracle) importable(dir string) *pkg {
	var found *pkg
	for _, f := range o.files {
		if f.dir != dir || f.test || f.ignored {
			continue
		}
		if found != nil && found != f.pkg {
			return nil
		}
		found = f.pkg
	}
	return found
}

func (o *oracle) resolveImports(f *file) {
	f.imports = map[string]string{}
	if f.mod == nil {
		return
	}
	for _, spec := range f.ast.Imports {
		ipath, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		var dir string
		switch {
		case ipath == f.mod.path:
			dir = f.mod.dir
		case strings.HasPrefix(ipath, f.mod.path+"/"):
			dir = path.Join(f.mod.dir, strings.TrimPrefix(ipath, f.mod.path+"/"))
		default:
			continue
		}
		if o.moduleOf(dir) != f.mod {
			continue // a nested module: another version may be the one imported
		}
		target := o.importable(dir)
		if target == nil {
			continue
		}
		name := target.name
		if spec.Name != nil {
			name = spec.Name.Name
		}
		if name == "_" || name == "." {
			continue
		}
		f.imports[name] = dir
	}
}

// --- calls ----------------------------------------------------------------------------------------

// visible tells whether code in caller can see a declaration in decl: test files are seen only by
// the tests of their own directory.
func visible(caller, decl *file) bool {
	return !decl.test || (caller.test && caller.dir == decl.dir)
}

func uniqueDef(defs []*definition, caller *file) *definition {
	var found *definition
	for _, d := range defs {
		if !visible(caller, d.file) {
			continue
		}
		if found != nil {
			return nil
		}
		found = d
	}
	return found
}

func uniqueType(types []*typeDecl, caller *file) *typeDecl {
	var found *typeDecl
	for _, t := range types {
		if !visible(caller, t.file) {
			continue
		}
		if found != nil {
			return nil
		}
		found = t
	}
	return found
}

func (o *oracle) calls() []call {
	set := map[call]bool{}
	for _, f := range o.files {
		for _, decl := range f.ast.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			qualname := fd.Name.Name
			if fd.Recv != nil {
				recv := receiverType(fd.Recv)
				if recv == "" {
					continue
				}
				qualname = recv + "." + qualname
			}
			caller := f.rel + "::" + qualname
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if callee := o.resolveCall(f, c.Fun, 0); callee != nil {
						set[call{caller, callee.key()}] = true
					}
				}
				return true
			})
		}
	}
	out := make([]call, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Caller != out[j].Caller {
			return out[i].Caller < out[j].Caller
		}
		return out[i].Callee < out[j].Callee
	})
	return out
}

// importDir is the imported package an identifier names in f, if it names one.
func importDir(f *file, e ast.Expr) (string, bool) {
	id, ok := e.(*ast.Ident)
	if !ok || id.Obj != nil {
		return "", false
	}
	dir, ok := f.imports[id.Name]
	return dir, ok
}

// resolveCall is the one function or method a call's function expression names, or nil.
func (o *oracle) resolveCall(f *file, fun ast.Expr, depth int) *definition {
	fun = unparen(fun)
	// An explicit instantiation f[int](...) calls f.
	switch e := fun.(type) {
	case *ast.IndexExpr:
		fun = unparen(e.X)
	case *ast.IndexListExpr:
		fun = unparen(e.X)
	}
	switch e := fun.(type) {
	case *ast.Ident:
		// A local name (variable, parameter, local type) is never a package function.
		if e.Obj != nil && e.Obj.Kind != ast.Fun {
			return nil
		}
		return uniqueDef(f.pkg.funcs[e.Name], f)
	case *ast.SelectorExpr:
		if dir, ok := importDir(f, e.X); ok {
			if target := o.importable(dir); target != nil {
				return uniqueDef(target.funcs[e.Sel.Name], f)
			}
			return nil
		}
		t := o.typeOf(f, e.X, depth+1)
		if t == nil {
			return nil
		}
		return uniqueDef(t.file.pkg.methods[t.spec.Name.Name+"."+e.Sel.Name], f)
	}
	return nil
}

func unparen(e ast.Expr) ast.Expr {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}

// resolveType is the package-level named type a type expression written in f denotes, looking
// through one pointer and type arguments; nil for anything else.
func (o *oracle) resolveType(f *file, e ast.Expr) *typeDecl {
	e = unparen(e)
	if star, ok := e.(*ast.StarExpr); ok {
		e = unparen(star.X)
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	switch x := e.(type) {
	case *ast.Ident:
		if x.Obj != nil {
			// Declared in this file: only a package-level type counts (not a type parameter or a
			// local type).
			ts, ok := x.Obj.Decl.(*ast.TypeSpec)
			if !ok || x.Obj.Kind != ast.Typ || o.topTypes[ts] == nil {
				return nil
			}
		}
		return uniqueType(f.pkg.types[x.Name], f)
	case *ast.SelectorExpr:
		if dir, ok := importDir(f, x.X); ok {
			if target := o.importable(dir); target != nil {
				return uniqueType(target.types[x.Sel.Name], f)
			}
		}
	}
	return nil
}

// typeOf is the named type of an expression in f when the syntax alone fixes it, else nil.
func (o *oracle) typeOf(f *file, e ast.Expr, depth int) *typeDecl {
	if depth > maxDepth {
		return nil
	}
	switch x := unparen(e).(type) {
	case *ast.StarExpr:
		return o.typeOf(f, x.X, depth+1)
	case *ast.UnaryExpr:
		if x.Op == token.AND {
			return o.typeOf(f, x.X, depth+1)
		}
	case *ast.CompositeLit:
		if x.Type != nil {
			return o.resolveType(f, x.Type)
		}
	case *ast.TypeAssertExpr:
		if x.Type != nil {
			return o.resolveType(f, x.Type)
		}
	case *ast.CallExpr:
		return o.typeOfCall(f, x, 0, 1, depth+1)
	case *ast.Ident:
		return o.typeOfVar(f, x, depth+1)
	case *ast.SelectorExpr:
		owner := o.typeOf(f, x.X, depth+1)
		if owner == nil {
			return nil
		}
		st, ok := owner.spec.Type.(*ast.StructType)
		if !ok || owner.spec.Assign.IsValid() {
			return nil
		}
		// Only a field the struct declares itself: a promoted one could be shadowed.
		for _, field := range st.Fields.List {
			if len(field.Names) == 0 {
				if receiverName(field.Type) == x.Sel.Name {
					return o.resolveType(owner.file, field.Type)
				}
				continue
			}
			for _, n := range field.Names {
				if n.Name == x.Sel.Name {
					return o.resolveType(owner.file, field.Type)
				}
			}
		}
	}
	return nil
}

// receiverName is the name an embedded field takes from its type (`*pkg.T[int]` -> T).
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// typeOfVar follows a local variable (or one declared in the same file) to its declaration.
func (o *oracle) typeOfVar(f *file, id *ast.Ident, depth int) *typeDecl {
	obj := id.Obj
	if obj == nil || obj.Kind != ast.Var {
		return nil
	}
	switch d := obj.Decl.(type) {
	case *ast.Field: // receiver, parameter or named result
		if _, variadic := d.Type.(*ast.Ellipsis); variadic {
			return nil
		}
		return o.resolveType(f, d.Type)
	case *ast.ValueSpec:
		if d.Type != nil {
			return o.resolveType(f, d.Type)
		}
		i := identIndex(d.Names, obj)
		return o.typeOfValue(f, d.Values, i, len(d.Names), depth)
	case *ast.AssignStmt:
		if d.Tok != token.DEFINE {
			return nil
		}
		var names []*ast.Ident
		for _, lhs := range d.Lhs {
			n, _ := lhs.(*ast.Ident)
			names = append(names, n)
		}
		return o.typeOfValue(f, d.Rhs, identIndex(names, obj), len(names), depth)
	}
	return nil
}

func identIndex(names []*ast.Ident, obj *ast.Object) int {
	for i, n := range names {
		if n != nil && n.Obj == obj {
			return i
		}
	}
	return -1
}

// typeOfValue is the type of the i-th of n names declared from values.
func (o *oracle) typeOfValue(f *file, values []ast.Expr, i, n, depth int) *typeDecl {
	if i < 0 {
		return nil
	}
	if len(values) == n {
		return o.typeOf(f, values[i], depth)
	}
	if len(values) == 1 {
		if c, ok := unparen(values[0]).(*ast.CallExpr); ok {
			return o.typeOfCall(f, c, i, n, depth)
		}
	}
	return nil
}

// typeOfCall is the type of the i-th of n results of a call: a resolved function's declared
// result, a conversion to a named type, or new(T).
func (o *oracle) typeOfCall(f *file, c *ast.CallExpr, i, n, depth int) *typeDecl {
	if depth > maxDepth {
		return nil
	}
	fun := unparen(c.Fun)
	if id, ok := fun.(*ast.Ident); ok && id.Name == "new" && id.Obj == nil && n == 1 && len(c.Args) == 1 &&
		len(f.pkg.funcs["new"]) == 0 && len(f.pkg.types["new"]) == 0 {
		return o.resolveType(f, c.Args[0])
	}
	if callee := o.resolveCall(f, fun, depth); callee != nil {
		if callee.decl == nil || callee.decl.Type.Results == nil {
			return nil
		}
		var results []ast.Expr
		for _, field := range callee.decl.Type.Results.List {
			for k := 0; k < max(1, len(field.Names)); k++ {
				results = append(results, field.Type)
			}
		}
		if len(results) != n {
			return nil
		}
		return o.resolveType(callee.file, results[i])
	}
	if n == 1 && len(c.Args) == 1 {
		return o.resolveType(f, fun)
	}
	return nil
}
