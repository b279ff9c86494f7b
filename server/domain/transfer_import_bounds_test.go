package domain_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/klauspost/compress/gzip"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestImportArchiveBounds: each bound of an archive (docs/transfer-archive.md, "Limits") is
// refused as corrupt with what it exceeds named, before the import reads further; the same
// archive within the bound is refused only for what else is wrong with it.
func TestImportArchiveBounds(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, servertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	org, err := domain.CreateOrganization(ctx, conn, "bounds", "Bounds")
	if err != nil {
		t.Fatal(err)
	}
	tiny := func(n int, name func(i int) string) []entry {
		out := make([]entry, n)
		for i := range out {
			out[i] = entry{name: name(i), data: []byte("{}\n")}
		}
		return out
	}
	unknown := func(i int) string { return fmt.Sprintf("unknown/%06d.jsonl", i+1) }
	manifest := func(size int) entry { return entry{name: domain.ManifestName, data: bytes.Repeat([]byte(" "), size)} }
	orgRow := []byte(`{"id": "org_x", "slug": "x", "display_name": "X"}` + "\n")
	for _, c := range []struct {
		name    string
		archive []byte
		want    string // in the refusal's message
	}{
		{"a member of the most bytes", archive(t, []entry{{name: "organization/000001.jsonl", size: domain.MaxMemberBytes}}, 0), "row 1 is longer"},
		{"a member past the most bytes", archive(t, []entry{{name: "organization/000001.jsonl", size: domain.MaxMemberBytes + 1}}, 0), "more than a member holds"},
		{"an unknown member past the most bytes", archive(t, []entry{{name: "secrets", size: domain.MaxMemberBytes + 1}}, 0), "more than a member holds"},
		{"the most members", archive(t, tiny(domain.MaxArchiveMembers, unknown), 0), "no manifest"},
		{"a member past the most", archive(t, tiny(domain.MaxArchiveMembers+1, unknown), 0), "more than 16400 members"},
		{"a manifest of the most bytes", archive(t, append(tiny(2, unknown), manifest(domain.ManifestHeadBytes+2*domain.ManifestMemberBytes)), 0), "manifest: unexpected end of JSON input"},
		{"a manifest past the most bytes", archive(t, append(tiny(2, unknown), manifest(domain.ManifestHeadBytes+2*domain.ManifestMemberBytes+1)), 0), "a manifest of 66561 bytes after 2 members (a file of at most 66560)"},
		{"the most after the tar's end", archive(t, nil, domain.MaxTrailingBytes), "no manifest"},
		{"past the most after the tar's end", archive(t, nil, domain.MaxTrailingBytes+1), "after the tar's end"},
		{"a short part before another of its kind", archive(t, []entry{{name: "organization/000001.jsonl", data: orgRow},
			{name: "organization/000002.jsonl", data: orgRow}, {name: domain.ManifestName, data: []byte(`{"format_version": 2}`)}}, 0),
			`member "organization/000002.jsonl" after a part of 50 bytes`},
		{"a member listed twice", archive(t, []entry{{name: "organization/000001.jsonl", data: orgRow}, {name: domain.ManifestName, data: []byte(
			`{"format_version": 2, "members": [{"name": "organization/000001.jsonl"}, {"name": "organization/000001.jsonl"}]}`)}}, 0),
			"organization/000001.jsonl listed twice"},
	} {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, _, err := domain.ImportArchive(ctx, tx, org.ID, "test", bytes.NewReader(c.archive))
			return err
		})
		if !errors.Is(err, domain.ErrArchiveCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want archive corrupt: ...%s...", c.name, err, c.want)
		}
	}
}

// entry is an archive's member: data, or size bytes of x.
type entry struct {
	name string
	data []byte
	size int
}

// archive writes entries into a gzip-compressed tar followed by trailing zero bytes.
func archive(t *testing.T, entries []entry, trailing int) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		data := e.data
		if data == nil {
			data = bytes.Repeat([]byte("x"), e.size)
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := gz.Write(make([]byte, trailing)); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
