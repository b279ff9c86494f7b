package domain

import (
	"encoding/binary"
	"strconv"
	"strings"

	"renga.dev/renga/server/db"
)

// ObservationID is an observation's key (migration 00020): 128 bits, shown as an ID of
// db.NewID's shape (obs_ and 26 characters, the first ten the time received), or, for an
// observation stored before, as the obs_<n> it had then (its top 64 bits zero). Its order is
// the bits': the list's.
type ObservationID [16]byte

// String is the ID as the API shows it.
func (id ObservationID) String() string {
	if binary.BigEndian.Uint64(id[:8]) == 0 {
		return "obs_" + strconv.FormatUint(binary.BigEndian.Uint64(id[8:]), 10)
	}
	return db.FormatID("obs", id)
}

// ParseObservationID reads an ID String shows: obs_ and 26 characters, or obs_<n> (n from 1, as
// the IDs of observations stored before migration 00020 were).
func ParseObservationID(s string) (ObservationID, bool) {
	if key, ok := db.ParseID("obs", s); ok && binary.BigEndian.Uint64(key[:8]) != 0 {
		return key, true
	}
	digits, ok := strings.CutPrefix(s, "obs_")
	n, err := strconv.ParseInt(digits, 10, 64)
	if !ok || err != nil || n <= 0 || strconv.FormatInt(n, 10) != digits {
		return ObservationID{}, false
	}
	var id ObservationID
	binary.BigEndian.PutUint64(id[8:], uint64(n))
	return id, true
}
