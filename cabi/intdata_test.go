//go:build cgo

package cabi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/asyncsteps/asyncsteps/cabi/internal/ctest"
)

// C code often passes a small integer as a step's data ((void*)1). Go
// must never hold one as a pointer: when the goroutine's stack is copied
// while it is, the runtime finds an invalid pointer and ends the process
// ("invalid pointer found on stack"). The steps here grow the stack from
// inside C callbacks whose data are integers.
func TestIntegerDataSurvivesAStackCopy(t *testing.T) {
	r, root := newRoot(t)
	ctest.IntData(root)
	if _, err := run(t, r); err != nil {
		t.Fatal(err)
	}
	checkTrace(t, "int data step 3", "int data wait 4", "int data cancel 5", "int data eh Timeout 4")
}

// The rule behind TestIntegerDataSurvivesAStackCopy, which cannot force
// every frame that holds a step's data to be on the stack when it is
// copied: no parameter or field of the package that holds C's data (named
// data, or ending in Data) is an unsafe.Pointer. C's data crosses into Go
// as a C.uintptr_t and turns back into a void* only in C.
func TestCDataIsNeverAGoPointer(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok {
				return true
			}
			for _, name := range field.Names {
				if name.Name != "data" && !strings.HasSuffix(name.Name, "Data") {
					continue
				}
				checked++
				if sel, ok := field.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Pointer" {
					t.Errorf("%s: %s is an unsafe.Pointer: C's data may be an integer", fset.Position(name.Pos()), name.Name)
				}
			}
			return true
		})
	}
	if checked < 10 {
		t.Errorf("%d parameters and fields named data checked, want the package's (at least 10)", checked)
	}
}
