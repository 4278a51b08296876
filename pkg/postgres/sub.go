package postgres

import (
	"embed"
	"io/fs"
)

// EmbeddedSet names the migrations directory of an embedded FS, the layout
// every package with migrations uses (//go:embed migrations/*.sql).
func EmbeddedSet(name string, fsys embed.FS) MigrationSet {
	sub, err := fs.Sub(fsys, "migrations")
	if err != nil {
		// fs.Sub fails only on an invalid path, and "migrations" is valid.
		panic(err)
	}
	return MigrationSet{Name: name, FS: sub}
}
