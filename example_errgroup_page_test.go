package asyncsteps_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestCookbookSnippetsAreExamples keeps docs/FROM-ERRGROUP.md true to the
// code that runs: every Go snippet of the page that is not labelled
// "Plain Go:" names, on the line above it, an Example of
// example_errgroup_test.go whose body holds the snippet line for line
// (indented once), and every Example of that file is on the page.
func TestCookbookSnippetsAreExamples(t *testing.T) {
	const pagePath, srcPath = "docs/FROM-ERRGROUP.md", "example_errgroup_test.go"
	page, err := os.ReadFile(pagePath)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(srcPath)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, srcPath, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && strings.HasPrefix(fd.Name.Name, "Example") {
			bodies[fd.Name.Name] = string(src[fset.Position(fd.Body.Lbrace).Offset:fset.Position(fd.Body.Rbrace).Offset])
		}
	}

	exampleName := regexp.MustCompile("`(Example\\w+)`")
	shown := map[string]bool{}
	lines := strings.Split(string(page), "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "```go" {
			continue
		}
		label, start := lines[i-1], i+1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		if label == "Plain Go:" {
			continue
		}
		m := exampleName.FindStringSubmatch(label)
		if m == nil {
			t.Errorf("%s:%d: the snippet's label %q names no Example", pagePath, start, label)
			continue
		}
		body, ok := bodies[m[1]]
		if !ok {
			t.Errorf("%s:%d: %s is not in %s", pagePath, start, m[1], srcPath)
			continue
		}
		indented := make([]string, 0, i-start)
		for _, l := range lines[start:i] {
			if l != "" {
				l = "\t" + l
			}
			indented = append(indented, l)
		}
		if !strings.Contains(body, "\n"+strings.Join(indented, "\n")+"\n") {
			t.Errorf("%s:%d: the snippet is not a block of %s's body", pagePath, start, m[1])
		}
		shown[m[1]] = true
	}
	for name := range bodies {
		if !shown[name] {
			t.Errorf("%s is on no snippet of %s", name, pagePath)
		}
	}
}
