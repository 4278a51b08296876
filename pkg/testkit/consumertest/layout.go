package consumertest

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// databasePackages are the import paths an application package must not
// name: it reaches the transaction through the unit of work its apply
// function is handed (versionguard.UnitOfWork), and its adapters do the
// SQL (docs/design.md, Inbox and deduplication).
func databasePackages() []string {
	return []string{"database/sql", "github.com/jmoiron/sqlx", "github.com/lib/pq", "github.com/jackc/pgx"}
}

// DatabaseImports lists, as "file: path", the imports of a database
// package (database/sql, sqlx, pq, pgx, or a package under one of them) in
// the Go files of the package in dir, its tests aside.
func DatabaseImports(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read package %s: %w", dir, err)
	}
	var out []string
	files := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return nil, fmt.Errorf("import path in %s: %w", name, err)
			}
			if slices.ContainsFunc(databasePackages(), func(db string) bool { return path == db || strings.HasPrefix(path, db+"/") }) {
				out = append(out, name+": "+path)
			}
		}
	}
	if files == 0 {
		return nil, fmt.Errorf("package %s has no Go files", dir)
	}
	return out, nil
}

// testAppImports checks that the consumer's application package names no
// database package.
func testAppImports(t *testing.T, c *suite) {
	found, err := DatabaseImports(c.f.App)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("the application package %s imports a database package; let its Store take the unit of work and its adapters use uow.Tx(): %s",
			c.f.App, strings.Join(found, ", "))
	}
}
