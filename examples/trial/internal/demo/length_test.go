package demo

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// handlerLines returns the number of lines of the ServeHTTP method in the
// Go file at path, from its func line to its closing brace.
func handlerLines(t *testing.T, path string) int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "ServeHTTP" {
			return fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
		}
	}
	t.Fatalf("%s has no ServeHTTP", path)
	return 0
}

// The trial's claim: the handler written with asyncsteps is no longer than
// the one written with errgroup, a context timeout and a semaphore.
func TestStepsHandlerIsNoLongerThanPlain(t *testing.T) {
	steps, plain := handlerLines(t, "../../steps/main.go"), handlerLines(t, "../../plain/main.go")
	t.Logf("ServeHTTP: %d lines with asyncsteps, %d with errgroup", steps, plain)
	if steps > plain {
		t.Errorf("the asyncsteps handler has %d lines, the errgroup one %d", steps, plain)
	}
}
