package agent_test

import (
	"testing"

	"renga.dev/renga/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }
