package db_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"renga.dev/renga/server/db"
)

func TestUnavailable(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("query: %w", &pgconn.PgError{Code: code}) }
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"a connection that could not be made", fmt.Errorf("acquire: %w", &pgconn.ConnectError{}), true},
		{"admin shutdown", pg("57P01"), true},
		{"cannot connect now", pg("57P03"), true},
		{"connection failure", pg("08006"), true},
		{"too many connections", pg("53300"), true},
		{"statement timeout", pg("57014"), true},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"connection lost mid-read", fmt.Errorf("x: %w", io.ErrUnexpectedEOF), true},
		{"unique violation", pg("23505"), false},
		{"check violation", pg("23514"), false},
		{"no rows", pgx.ErrNoRows, false},
		{"another error", errors.New("boom"), false},
	} {
		if got := db.Unavailable(tt.err); got != tt.want {
			t.Errorf("%s: Unavailable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
