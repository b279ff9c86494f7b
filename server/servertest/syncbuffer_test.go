package servertest

import (
	"strings"
	"sync"
	"testing"
)

func TestSyncBufferKeepsEverythingInOrder(t *testing.T) {
	var s SyncBuffer
	var want strings.Builder
	for i := 0; i < 3000; i++ {
		line := strings.Repeat(string(rune('a'+i%26)), 1+i%997) + "\n"
		want.WriteString(line)
		if n, err := s.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	big := strings.Repeat("z", 3*syncBufferChunk+5) // wider than a chunk
	want.WriteString(big)
	_, _ = s.Write([]byte(big))
	if got := s.String(); got != want.String() {
		t.Errorf("String differs from what was written (%d vs %d bytes)", len(got), want.Len())
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				_, _ = s.Write([]byte("0123456789\n"))
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(s.String(), "0123456789\n"); got != 8000 {
		t.Errorf("%d concurrent lines kept, want 8000", got)
	}
}

func TestLogFileKeepsEveryLineWhole(t *testing.T) {
	l := NewLogFile(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			line := strings.Repeat(string(rune('a'+i)), 500) + "\n"
			for range 500 {
				if n, err := l.Write([]byte(line)); n != len(line) || err != nil {
					t.Errorf("Write = %d, %v", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := l.Contents()
	if err != nil {
		t.Fatal(err)
	}
	if got != l.String() {
		t.Error("String differs from Contents")
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 8*500 {
		t.Fatalf("%d lines, want %d", len(lines), 8*500)
	}
	for _, line := range lines {
		if len(line) != 500 || strings.Count(line, line[:1]) != 500 {
			t.Fatalf("a line interleaved with another: %.40q...", line)
		}
	}
}
